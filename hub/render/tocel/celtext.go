package tocel

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
)

// Helpers that write CEL text. Field names that are CEL identifiers are selected with a dot
// (object.spec.containers) so that Kyverno's textual autogen rewrite of object.spec and
// object.metadata finds them; any other key is indexed (labels['app.kubernetes.io/name']).

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// celReserved are words CEL will not accept as a selected field name.
var celReserved = map[string]bool{
	"as": true, "break": true, "const": true, "continue": true, "else": true, "false": true,
	"for": true, "function": true, "if": true, "import": true, "in": true, "let": true,
	"loop": true, "package": true, "namespace": true, "null": true, "return": true,
	"true": true, "var": true, "void": true, "while": true,
}

func selectable(key string) bool {
	return identifier.MatchString(key) && !celReserved[key]
}

// field is the CEL selecting key in the map expression x.
func field(x, key string) string {
	if selectable(key) {
		return x + "." + key
	}
	return x + "[" + quote(key) + "]"
}

// present is the CEL testing that the map expression x has key.
func present(x, key string) string {
	if selectable(key) {
		return "has(" + x + "." + key + ")"
	}
	return quote(key) + " in " + x
}

// quote writes s as a single-quoted CEL string literal.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('\'')
	for _, r := range s {
		switch r {
		case '\\':
			b.WriteString(`\\`)
		case '\'':
			b.WriteString(`\'`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if unicode.IsPrint(r) {
				b.WriteRune(r)
			} else {
				fmt.Fprintf(&b, `\U%08x`, r)
			}
		}
	}
	b.WriteByte('\'')
	return b.String()
}

// celNames are the names a ValidatingPolicy expression already binds or calls; a comprehension
// variable never takes one.
var celNames = map[string]bool{
	"object": true, "oldObject": true, "request": true, "namespaceObject": true, "params": true,
	"variables": true, "authorizer": true, "element": true, "has": true, "size": true,
	"type": true, "string": true, "int": true, "bool": true, "double": true, "list": true,
	"map": true, "null_type": true, "dyn": true, "all": true, "exists": true, "matches": true,
}

// namer hands out comprehension variable names, each used once per expression so that nested
// comprehensions never shadow one another.
type namer struct{ used map[string]bool }

func newNamer() *namer { return &namer{used: map[string]bool{}} }

// name derives a variable from a list key: containers → container, initContainers →
// initContainer; anything else → item.
func (n *namer) name(hint string) string {
	base := strings.TrimSuffix(hint, "s")
	if !identifier.MatchString(base) || celReserved[base] || base == "" {
		base = "item"
	}
	name := base
	for i := 2; n.used[name] || celNames[name] || celReserved[name]; i++ {
		name = fmt.Sprintf("%s%d", base, i)
	}
	n.used[name] = true
	return name
}
