package api

import (
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/errcode"
)

// TestErrorCodesAreDocumented: every code an error status maps to, and
// every code set directly, is in the enum the OpenAPI document gives
// Error.code, so a client generated from it knows them all.
func TestErrorCodesAreDocumented(t *testing.T) {
	t.Parallel()
	field, ok := reflect.TypeOf(Error{}).FieldByName("Code")
	require.True(t, ok)
	enum := strings.Split(field.Tag.Get("enum"), ",")
	for status := 400; status < 600; status++ {
		if http.StatusText(status) == "" {
			continue
		}
		require.Contains(t, enum, string(codeOf(status)), "status %d", status)
	}
	for _, c := range []errcode.Code{errcode.TooManySync, errcode.TooManyStreams} {
		require.True(t, slices.Contains(enum, string(c)), "%s", c)
	}
}
