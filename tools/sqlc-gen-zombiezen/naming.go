package main

import (
	"fmt"
	"go/token"
	"strings"
	"unicode"
	"unicode/utf8"
)

// exportedName turns a SQL name such as "user_id" into "UserID". Like
// sqlc-gen-go, the word "id" becomes "ID"; other words are title-cased.
func exportedName(s string) string {
	var b strings.Builder
	for _, w := range strings.FieldsFunc(s, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if strings.EqualFold(w, "id") {
			b.WriteString("ID")
			continue
		}
		b.WriteString(upperFirst(w))
	}
	name := b.String()
	if r, _ := utf8.DecodeRuneInString(name); !unicode.IsLetter(r) {
		name = "X" + name // empty, or starts with a digit
	}
	return name
}

// lowerFirst turns an exported name into an unexported one:
// "UserID" → "userID", "ID" → "id", "URLPath" → "urlPath".
func lowerFirst(s string) string {
	r := []rune(s)
	n := 0
	for n < len(r) && unicode.IsUpper(r[n]) {
		n++
	}
	if n > 1 && n < len(r) {
		n-- // keep the start of the next word: "URLPath" → "url" + "Path"
	}
	for i := range n {
		r[i] = unicode.ToLower(r[i])
	}
	return string(r)
}

func upperFirst(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(r)) + s[n:]
}

// reserved are names a lone parameter must not take: Go keywords and
// predeclared identifiers, plus everything a generated function body uses.
var reserved = map[string]bool{
	"any": true, "bool": true, "byte": true, "error": true, "false": true, "float64": true, "int": true,
	"int64": true, "len": true, "make": true, "nil": true, "string": true, "true": true,
	"arg": true, "conn": true, "err": true, "errors": true, "fmt": true, "fn": true, "hasRow": true,
	"n": true, "resetErr": true, "row": true, "sqlite": true, "stmt": true, "v": true, "val": true,
	"bindAny": true, "columnAny": true,
}

// escape appends "_" to names that are Go keywords or otherwise reserved.
func escape(s string) string {
	if token.IsKeyword(s) || reserved[s] {
		return s + "_"
	}
	return s
}

// names hands out unique names, suffixing duplicates with _2, _3, ...
type names map[string]bool

func (ns *names) add(name string) string {
	if *ns == nil {
		*ns = names{}
	}
	unique := name
	for i := 2; (*ns)[unique]; i++ {
		unique = fmt.Sprintf("%s_%d", name, i)
	}
	(*ns)[unique] = true
	return unique
}
