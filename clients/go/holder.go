package padlock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
)

// A hold belongs to a holder, the string the server counts reentries and
// permits by. In Go the holder travels in a context.Context: the context
// an acquire returns carries it, so code that locks the same key again
// with a context derived from it reenters instead of waiting for itself,
// and two goroutines with unrelated contexts are two holders.

type holderKey struct{}

// levelKey marks the context of one acquire (see hold.levels).
type levelKey struct{}

// WithHolder returns a context whose acquires hold as holder: use it to
// share one holder across goroutines, or processes, on purpose.
func WithHolder(ctx context.Context, holder string) context.Context {
	return context.WithValue(ctx, holderKey{}, holder)
}

// HolderFrom is the holder ctx carries, if any.
func HolderFrom(ctx context.Context) (string, bool) {
	h, ok := ctx.Value(holderKey{}).(string)
	return h, ok && h != ""
}

// NewHolder is a fresh random holder: 128 bits in hex.
func NewHolder() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// holderOf is ctx's holder, or a fresh one.
func holderOf(ctx context.Context) string {
	if h, ok := HolderFrom(ctx); ok {
		return h
	}
	return NewHolder()
}
