package padlock

// Holds the server may still count though this Client no longer does: a
// hold lost with no answer (a renewal or release that never got through),
// whose holder's next take would otherwise reenter it (its old fence, a
// count nobody sees), and holds of a holder taken elsewhere.

import (
	"context"
	"time"
)

// leftover is a lost hold's release, and until when (mono) the server may
// still count the hold: twice its ttl, 10 s at least (past that the
// server has let it run out).
type leftover struct {
	release []any
	until   time.Duration
}

// leftMax bounds the leftovers remembered at once: a holder never seen
// again (each Acquire without one draws its own) leaves its entry behind.
const leftMax = 10_000

func (c *Client) leftOver(name string, release []any, ttl time.Duration) {
	now := mono()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.leftovers) >= leftMax {
		for k, l := range c.leftovers {
			if l.until <= now {
				delete(c.leftovers, k)
			}
		}
		for k := range c.leftovers { // still full: any of them goes
			if len(c.leftovers) < leftMax {
				break
			}
			delete(c.leftovers, k)
		}
	}
	c.leftovers[name] = leftover{release, now + max(2*ttl, 10*time.Second)}
}

// releaseRest: the server counts holds of this holder that this Client
// did not take (another Client with the same holder): released too, so
// that nothing stays held after the last release.
func (h *hold) releaseRest() {
	h.end(h.releaseAll(h.s.release(h.holder), 64), ErrReleased)
}

// clearLeftover: before the first take, what a lost hold of this name
// left over is released until none is left, at most 16 times (the rest
// runs out with its lease); NOTHELD: none was (caller holds mu).
func (h *hold) clearLeftover() {
	args := h.leftover
	h.leftover = nil
	h.releaseAll(args, 16)
}

// releaseAll sends args, one release, until the server holds none of the
// hold (true), an error, or tries sendings.
func (h *hold) releaseAll(args []any, tries int) bool {
	for range tries {
		reply, _, err := h.send(context.Background(), func(time.Duration) []any { return args }, phaseRelease, mono()+time.Second, false)
		if err != nil {
			return false
		}
		if h.s.releasedAll(reply) {
			return true
		}
	}
	return false
}
