package schedule

import (
	"encoding/binary"
	"time"

	"github.com/zeebo/blake3"
)

// jitterDomain separates these hashes from any other use of BLAKE3 here.
const jitterDomain = "ductile schedule jitter v1"

// jitterOffset returns the offset of the firing of entry id of plugin at
// nominal: whole milliseconds in [-jitter/2, +jitter/2], spread evenly, and
// the same every time it is asked (after a restart, on another machine), so
// that a firing's due time never wanders.
func jitterOffset(plugin, id string, nominal time.Time, jitter time.Duration) time.Duration {
	half := int64(jitter / 2 / time.Millisecond)
	if half <= 0 {
		return 0
	}
	h := blake3.New()
	var n [8]byte
	for _, part := range []string{jitterDomain, plugin, id} {
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write([]byte(part))
	}
	binary.BigEndian.PutUint64(n[:], uint64(nominal.UnixNano()))
	h.Write(n[:])
	sum := h.Sum(nil)
	// 2·half+1 is below 2^44 (a Duration holds under 300 years of
	// milliseconds), so the modulo's bias is under 2^-20.
	r := binary.BigEndian.Uint64(sum[:8]) % uint64(2*half+1)
	return time.Duration(int64(r)-half) * time.Millisecond
}
