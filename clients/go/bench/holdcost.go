package main

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	padlock "github.com/padlock-redis/padlock/clients/go"
)

// holdCost is the Go row of scripts/bench/holdcost.py: n holds on n keys,
// then n waiters on one held key, each a goroutine of one process; the
// connections besides the application's own, the commands per second the
// server runs while the holds sit idle and while the waiters wait, how
// many were served and whether in the order they queued. One JSON line.
func holdCost(addr string, n int) {
	const ttl = 3 * time.Second
	ctx := context.Background()
	watch := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1, Protocol: 2})
	defer watch.Close()
	clients := func() int {
		list, err := watch.ClientList(ctx).Result()
		check(err)
		return len(strings.Split(strings.TrimSpace(list), "\n"))
	}
	callsRe := regexp.MustCompile(`calls=(\d+)`)
	calls := func() int {
		text, err := watch.Info(ctx, "commandstats").Result()
		check(err)
		sum := 0
		for _, m := range callsRe.FindAllStringSubmatch(text, -1) {
			v, _ := strconv.Atoi(m[1])
			sum += v
		}
		return sum
	}
	check(watch.FlushAll(ctx).Err())
	app := redis.NewClient(&redis.Options{Addr: addr})
	defer app.Close()
	check(app.Ping(ctx).Err())
	base := clients()
	p, err := padlock.New(app)
	check(err)
	defer p.Close()
	release := make(chan struct{})
	var held, done sync.WaitGroup
	for i := range n {
		held.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			l := p.Lock(fmt.Sprintf("h:%d", i), padlock.TTL(ttl))
			h, err := l.Acquire(ctx)
			check(err)
			held.Done()
			<-release
			check(l.Release(h))
		}()
	}
	held.Wait()
	time.Sleep(ttl) // every hold's first round has run
	holdConns := clients() - base
	before := calls()
	time.Sleep(6 * time.Second)
	idleRate := max(0, float64(calls()-before-1)/6)
	close(release)
	done.Wait()

	owner := p.Lock("hot", padlock.TTL(ttl))
	oh, err := owner.Acquire(padlock.WithHolder(ctx, "owner"))
	check(err)
	var mu sync.Mutex
	var order []int
	var waiters sync.WaitGroup
	for i := range n {
		waiters.Add(1)
		go func() {
			defer waiters.Done()
			l := p.Lock("hot", padlock.TTL(ttl))
			wctx, cancel := context.WithTimeout(padlock.WithHolder(ctx, fmt.Sprintf("w%d", i)), 120*time.Second)
			defer cancel()
			h, err := l.Acquire(wctx)
			if err != nil {
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			_ = l.Release(h)
		}()
	}
	time.Sleep(2500 * time.Millisecond) // all queued
	from := calls()
	time.Sleep(2 * time.Second)
	waitRate := max(0, float64(calls()-from-1)/2)
	waitConns := clients() - base
	queue := serverQueue(ctx, watch)
	check(owner.Release(oh))
	waiters.Wait()
	// Goroutines reach the server in the order the scheduler runs them: FIFO
	// is the server's queue order (its first entries).
	fifo := len(queue) > 0 && len(order) >= len(queue)
	for i, h := range queue {
		if i < len(order) && fmt.Sprintf("w%d", order[i]) != h {
			fifo = false
		}
	}
	out, _ := json.Marshal(map[string]any{"client": "padlock Go (go-redis)", "hold_conns": holdConns,
		"idle_rate": idleRate, "wait_conns": waitConns, "wait_rate": waitRate, "acquired": len(order), "fifo": fifo})
	fmt.Println(string(out))
}

// serverQueue is the holders queued on "hot" in serving order (the first
// entries LOCK.INFO lists).
func serverQueue(ctx context.Context, r *redis.Client) []string {
	raw, err := r.Do(ctx, "LOCK.INFO", "hot").Slice()
	if err != nil {
		return nil
	}
	for i := 0; i+1 < len(raw); i += 2 {
		if fmt.Sprint(raw[i]) != "queue" {
			continue
		}
		entries, _ := raw[i+1].([]any)
		var out []string
		for _, e := range entries {
			if pair, ok := e.([]any); ok && len(pair) > 0 {
				out = append(out, fmt.Sprint(pair[0]))
			}
		}
		return out
	}
	return nil
}
