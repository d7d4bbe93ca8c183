package pluginhost

import (
	"fmt"
	"unicode/utf8"
)

// Excerpt is what is recorded of b, the first len(b) of total bytes a
// plugin wrote to one of its pipes: all of it when it is all there and no
// longer than 2·ExcerptBytes; else its first and its last ExcerptBytes
// (each cut to whole UTF-8 characters), with a line between them that says
// how many bytes were left out, and how many there were in all. cut
// reports that bytes were left out. One flooding plugin so costs the
// ledger at most about 64 KiB per stream and attempt, not the whole of
// what it wrote.
func Excerpt(b []byte, total int64) (out []byte, cut bool) {
	if total <= int64(len(b)) && len(b) <= 2*ExcerptBytes {
		return b, false
	}
	head := b[:min(len(b), ExcerptBytes)]
	tail := b[max(len(head), len(b)-ExcerptBytes):]
	return excerpt(head, tail, max(total, int64(len(b)))), true
}

// excerpt joins head, the first bytes of total, and tail, the last bytes of
// what was read, with a line that says what lies between them.
func excerpt(head, tail []byte, total int64) []byte {
	head, tail = wholeRunesHead(head), wholeRunesTail(tail)
	out := make([]byte, 0, len(head)+len(tail)+80)
	out = append(out, head...)
	if len(head) > 0 && head[len(head)-1] != '\n' {
		out = append(out, '\n')
	}
	out = fmt.Appendf(out, "[ductile: %d bytes left out here; %d bytes in all]\n", total-int64(len(head)+len(tail)), total)
	return append(out, tail...)
}

// wholeRunesHead is b without a UTF-8 character cut short at its end.
func wholeRunesHead(b []byte) []byte {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			break
		}
	}
	return b
}

// wholeRunesTail is b without the continuation bytes, at its start, of a
// UTF-8 character whose beginning it does not hold.
func wholeRunesTail(b []byte) []byte {
	for i := 0; i < len(b) && i < utf8.UTFMax; i++ {
		if utf8.RuneStart(b[i]) {
			return b[i:]
		}
	}
	return b
}
