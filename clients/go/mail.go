package padlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// errReplaced: a connection a mailbox wait relies on was replaced; the
// wait is sent again with its request-id (queued again, or answered with
// its grant).
var errReplaced = errors.New("padlock: a mailbox wait's connection was replaced")

func index(args []any, word string) int {
	for i, a := range args {
		if s, ok := a.(string); ok && s == word {
			return i
		}
	}
	return -1
}

func argAfter(args []any, word string) string {
	if i := index(args, word); i >= 0 && i+1 < len(args) {
		return fmt.Sprint(args[i+1])
	}
	return ""
}

func isWaiting(reply any) bool { return fmt.Sprint(reply) == "WAITING" }

// parseOutcome is a mailed reply as the blocked form would have given it.
func parseOutcome(outcome string) (any, error) {
	switch {
	case outcome == "nil":
		return nil, nil
	case strings.HasPrefix(outcome, "-"):
		return nil, &ReplyError{Msg: outcome[1:]}
	case strings.Contains(outcome, ","):
		var out []any
		for _, f := range strings.Split(outcome, ",") {
			n, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("padlock: bad mailed reply %q", outcome)
			}
			out = append(out, n)
		}
		return out, nil
	}
	n, err := strconv.ParseInt(outcome, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("padlock: bad mailed reply %q", outcome)
	}
	return n, nil
}

// mailWait is a wait through the mailbox: queued on the keeper, which
// answers its grant at once or WAITING; then its outcome is mailed. Either
// connection replaced meanwhile is errReplaced. A caller that stops
// waiting (ctx) takes the wait back (LOCK.CANCEL), and a grant that raced
// it is given back. onKeeper: granted (at once, or mailed) while the
// keeper it was queued on still lives, so a KEEP grant is bound there,
// with the mailbox: no renewal needs to bind it again.
func mailWait(ctx context.Context, m *mailman, given []any, giveBack []any) (reply any, epoch uint64, onKeeper bool, err error) {
	k := m.k
	rid := argAfter(given, "ID")
	at := index(given, "BLOCK")
	ms, _ := strconv.ParseInt(fmt.Sprint(given[at+1]), 10, 64)
	key := fmt.Sprint(given[1])
	if fmt.Sprint(given[0]) == "LOCK.MACQUIRE" {
		key = fmt.Sprint(given[2])
	}
	args := append(append(append([]any{}, given[:at+2]...), "MAILBOX", m.boxFor(key)), given[at+2:]...)
	s := m.register(rid)
	defer m.forget(rid)
	epochs := [2]uint64{k.epoch.Load(), m.epoch.Load()}
	// Taken before the send: a connection replaced while it is sent closes it.
	gone := k.goneCh()
	reply, epoch, err = k.call(args, callTimeout)
	if err != nil || !isWaiting(reply) {
		return reply, epoch, err == nil, err
	}
	var end <-chan time.Time
	if ms > 0 {
		t := time.NewTimer(time.Duration(ms)*time.Millisecond + callTimeout)
		defer t.Stop()
		end = t.C
	}
	for {
		select {
		case outcome := <-s.outcome:
			reply, err = parseOutcome(outcome)
			return reply, epoch, k.epoch.Load() == epoch, err
		case <-ctx.Done():
			takeBack(k, args, rid, giveBack)
			return nil, epoch, false, ctx.Err()
		case <-end:
			return nil, epoch, false, fmt.Errorf("padlock: no outcome of %v within %d ms", args[0], ms)
		case <-s.poke:
		case <-gone:
		}
		if k.epoch.Load() != epochs[0] || m.epoch.Load() != epochs[1] || epoch != k.epoch.Load() {
			return nil, epoch, false, errReplaced
		}
	}
}

// takeBack: the caller stopped waiting. The request leaves its queue, and
// a grant it already had is released: never a hold the caller does not
// know about.
func takeBack(k *keeper, args []any, rid string, giveBack []any) {
	key, holder := args[1], args[2]
	if fmt.Sprint(args[0]) == "LOCK.MACQUIRE" {
		n, _ := strconv.Atoi(fmt.Sprint(args[1]))
		key, holder = args[2], args[2+n]
	}
	if got, _, err := k.call([]any{"LOCK.CANCEL", key, holder, rid}, callTimeout); err == nil && fmt.Sprint(got) == "1" {
		return
	}
	probe(k, args, giveBack)
}

// probe sends the request again with its id and a 1 ms wait: a resend
// answers its grant if it had one, which is then given back.
func probe(k *keeper, args []any, giveBack []any) {
	at := index(args, "BLOCK")
	p := append(append(append([]any{}, args[:at+1]...), "1"), args[at+2:]...)
	if i := index(p, "MAILBOX"); i >= 0 {
		p = append(p[:i:i], p[i+2:]...)
	}
	got, _, err := k.call(p, callTimeout)
	if err == nil && got != nil && !isWaiting(got) {
		_, _, _ = k.call(withID(giveBack, requestID()), callTimeout)
	}
}
