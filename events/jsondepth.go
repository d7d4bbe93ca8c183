package events

// MaxJSONDepth is how deeply the ledger lets JSON nest: the events table's
// CHECK (json_valid) refuses text nested deeper (SQLite's JSON_MAX_DEPTH).
const MaxJSONDepth = 1000

// JSONDepth returns how deeply text nests arrays and objects, counting
// brackets outside strings. It needs no valid JSON, so a decoder's own
// depth limit cannot hide the real depth: what producers check their JSON
// against before the ledger refuses it.
func JSONDepth(text []byte) int {
	depth, deepest := 0, 0
	inString, escaped := false, false
	for _, c := range text {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
			deepest = max(deepest, depth)
		case c == ']' || c == '}':
			depth--
		}
	}
	return deepest
}
