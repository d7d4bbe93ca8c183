package api

import (
	"encoding/base64"
	"net/http"
	"strconv"
)

// A page cursor of GET /jobs is opaque to clients: the seq of the last job
// the page showed, base64url-encoded (so clients do not build their own).

func formatCursor(seq int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte("seq:" + strconv.FormatInt(seq, 10)))
}

// parseCursor is the seq bound of cursor; none: 0 (no bound).
func parseCursor(cursor string) (int64, error) {
	if cursor == "" {
		return 0, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	var seq int64
	if err == nil && len(raw) > 4 && string(raw[:4]) == "seq:" {
		seq, err = strconv.ParseInt(string(raw[4:]), 10, 64)
	} else if err == nil {
		err = strconv.ErrSyntax
	}
	if err != nil || seq <= 0 {
		return 0, newError(http.StatusBadRequest, "pass the next_cursor of the previous page as it was, or no cursor for the first page",
			"the cursor is not one this API gave")
	}
	return seq, nil
}
