package padlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// ErrNotHeld is returned by a release (or a renewal) of a hold the caller
// does not have: never acquired, already released, or lost.
var ErrNotHeld = errors.New("padlock: not held")

// ErrLost is the cause of a held context's cancellation when its hold is
// lost: its key was deleted, overwritten, flushed or evicted, or its lease
// may have run out with no answer from the server.
var ErrLost = errors.New("padlock: the hold was lost")

// ErrReleased is the cause of a held context's cancellation once its hold
// was released: the context no longer stands for a hold.
var ErrReleased = errors.New("padlock: released")

// ErrNotAcquired is returned by Locker's Lock when the wait ended without
// the lock (its context's deadline passed).
var ErrNotAcquired = errors.New("padlock: not acquired")

// errLostHold is what a release of a lost hold returns: it is both.
var errLostHold = fmt.Errorf("%w: %w", ErrNotHeld, ErrLost)

// errTimeout: no reply within the time a command may take (resent).
var errTimeout = errors.New("padlock: no reply in time")

// ReplyError is an error reply of the server, as it was sent (the first
// word is its code: "WRONGTYPE", "TRYAGAIN", "NOTHELD", ...).
type ReplyError struct{ Msg string }

// Error is the server's line.
func (e *ReplyError) Error() string { return e.Msg }

// Code is the error's first word.
func (e *ReplyError) Code() string {
	code, _, _ := strings.Cut(e.Msg, " ")
	return code
}

// DeadlockError is returned instead of waiting into a cycle of the
// server's wait-for graph. Cycle is [holder, key, holder, key, ...,
// holder]: each holder waits for the key after it, held by the next.
type DeadlockError struct {
	Msg   string
	Cycle []string
}

// Error is the server's line, with the cycle.
func (e *DeadlockError) Error() string { return e.Msg }

// translate turns a server's error reply into the error the API promises.
func translate(err error) error {
	var r *ReplyError
	if !errors.As(err, &r) {
		return err
	}
	switch r.Code() {
	case "DEADLOCK":
		return &DeadlockError{Msg: r.Msg, Cycle: strings.Split(strings.TrimPrefix(r.Msg, "DEADLOCK "), " -> ")}
	case "NOTHELD":
		return fmt.Errorf("%w (%s)", ErrNotHeld, r.Msg)
	}
	return err
}

func isReply(err error) bool {
	var r *ReplyError
	return errors.As(err, &r)
}

func replyCode(err error) string {
	var r *ReplyError
	if errors.As(err, &r) {
		return r.Code()
	}
	return ""
}

// isContext reports whether err is the caller's context ending.
func isContext(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
