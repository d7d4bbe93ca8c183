package main

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/sqlc-dev/plugin-sdk-go/plugin"
)

// placeholders summarizes the bind parameters that appear in a query text.
type placeholders struct {
	bare     int          // anonymous "?" occurrences
	numbered map[int]bool // "?NNN" numbers
	named    []string     // ":x", "@x", "$x" (sqlc normally rewrites these)
}

// scanPlaceholders finds the bind parameters in a SQLite statement, skipping
// string literals, quoted identifiers and comments.
func scanPlaceholders(sql string) placeholders {
	p := placeholders{numbered: map[int]bool{}}
	skipTo := func(i int, end string) int {
		for j := i; j+len(end) <= len(sql); j++ {
			if sql[j:j+len(end)] == end {
				return j + len(end)
			}
		}
		return len(sql)
	}
	for i := 0; i < len(sql); {
		c := sql[i]
		switch {
		case c == '\'' || c == '"' || c == '`':
			// A doubled quote inside is just two adjacent literals to the scanner.
			i = skipTo(i+1, string(c))
		case c == '[':
			i = skipTo(i+1, "]")
		case c == '-' && i+1 < len(sql) && sql[i+1] == '-':
			i = skipTo(i+2, "\n")
		case c == '/' && i+1 < len(sql) && sql[i+1] == '*':
			i = skipTo(i+2, "*/")
		case c == '?':
			j := i + 1
			for j < len(sql) && isDigit(sql[j]) {
				j++
			}
			if j == i+1 {
				p.bare++
			} else {
				n, _ := strconv.Atoi(sql[i+1 : j])
				p.numbered[n] = true
			}
			i = j
		case (c == ':' || c == '@' || c == '$') && (i == 0 || !isIdentByte(sql[i-1])) &&
			i+1 < len(sql) && isIdentStart(sql[i+1]):
			j := i + 1
			for j < len(sql) && isIdentByte(sql[j]) {
				j++
			}
			p.named = append(p.named, sql[i:j])
			i = j
		case isIdentByte(c):
			// Skip whole words so that "a$b" is not read as a parameter.
			for i < len(sql) && isIdentByte(sql[i]) {
				i++
			}
		default:
			i++
		}
	}
	return p
}

func isNamed(p *plugin.Parameter) bool { return p.GetColumn().GetIsNamedParam() }

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isIdentStart(c byte) bool {
	return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c >= 0x80
}

func isIdentByte(c byte) bool { return isIdentStart(c) || isDigit(c) || c == '$' }

// bindIndexes returns the SQLite bind index (1-based) for each of q.Params.
//
// sqlc's SQLite engine passes anonymous "?" through unchanged and rewrites
// @name, :name, $name, sqlc.arg(name) and sqlc.narg(name) to "?N", reusing N
// for repeated names. Both forms are reliable on their own; mixed in one
// query, sqlc's Parameter.Number no longer matches the index SQLite assigns,
// so that is rejected instead of silently binding the wrong values.
func bindIndexes(q *plugin.Query) ([]int, error) {
	p := scanPlaceholders(q.Text)
	idx := make([]int, len(q.Params))
	switch {
	case len(p.named) > 0:
		return nil, fmt.Errorf("named parameter %s was left in the query text; use @name or sqlc.arg(name)", p.named[0])
	case p.bare > 0 && (len(p.numbered) > 0 || slices.ContainsFunc(q.Params, isNamed)):
		return nil, fmt.Errorf("query mixes anonymous ? with named or numbered parameters " +
			"(sqlc's rewriting then binds the wrong positions); use only ? or only @name/sqlc.arg(name)")
	case p.bare > 0:
		// sqlc orders the parameters of a ?-only query by their position in
		// the text, which is exactly how SQLite numbers anonymous parameters.
		if p.bare != len(q.Params) {
			return nil, fmt.Errorf("query text has %d ? placeholders but sqlc reported %d parameters", p.bare, len(q.Params))
		}
		for i := range idx {
			idx[i] = i + 1
		}
	default:
		var want []int
		for n := range p.numbered {
			want = append(want, n)
		}
		var got []int
		for i, param := range q.Params {
			idx[i] = int(param.Number)
			got = append(got, int(param.Number))
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(want, got) {
			return nil, fmt.Errorf("query text uses parameters %v but sqlc reported parameter numbers %v", want, got)
		}
	}
	return idx, nil
}
