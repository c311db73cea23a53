package padlock

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"time"
)

// How a hold's commands are resent, and what each failure means.
//
// Every changing command carries a fresh request-id (ID, docs/commands.md
// "Retries"): on a connection error or a reply that does not come in time,
// the same command with the same id goes out again on a fresh connection
// until the caller's deadline. The server answers a resend of an applied
// request with its first reply and changes nothing, so a lost reply never
// doubles a reentry or frees a nested hold.

// requestID is a fresh request-id: 96 random bits.
func requestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func withID(args []any, rid string) []any {
	if rid == "" {
		return args
	}
	return append(append([]any{}, args...), "ID", rid)
}

type verdict int

const (
	// resend the same request (same id) again, if time is left.
	resend verdict = iota
	// lost: the hold is gone.
	lost
	// raise: the caller's to handle.
	raise
)

type phase int

const (
	phaseAcquire phase = iota // an acquire that may wait
	phaseTry                  // one that does not
	phaseRenew
	phaseRelease
)

// judge says what err means while p runs. A failed connection or a
// timeout: resend. NOTHELD, or WRONGTYPE once the hold exists: lost. While
// renewing, any other error (OOM, NOPERM, a restart grace) is retried until
// the lease could have run out.
func judge(err error, p phase) verdict {
	acquiring := p == phaseAcquire || p == phaseTry
	if errors.Is(err, ErrNotHeld) {
		if acquiring {
			return raise
		}
		return lost
	}
	var d *DeadlockError
	if errors.As(err, &d) || isContext(err) || errors.Is(err, errTTL) {
		return raise
	}
	if !isReply(err) {
		return resend
	}
	code := replyCode(err)
	switch {
	case code == "WRONGTYPE":
		if acquiring {
			return raise
		}
		return lost
	case p == phaseRenew, code == "TRYAGAIN" && p != phaseTry:
		return resend
	}
	return raise
}

// pause is the wait before resend number attempt (10 ms doubling up to
// 500 ms), or false when the deadline (zero: none) leaves no time for it.
func pause(attempt int, now, deadline time.Time) (time.Duration, bool) {
	p := 10 * time.Millisecond << min(attempt, 6)
	p = min(p, 500*time.Millisecond)
	if !deadline.IsZero() && !now.Add(p).Before(deadline) {
		left := deadline.Sub(now)
		return left, left > time.Millisecond
	}
	return p, true
}
