package main

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// timerProbe shows what the contended table's "1 ms of work took" column
// measures besides the work: Go's runtime, once every goroutine is parked,
// waits for the next timer in epoll_wait, whose timeout is whole
// milliseconds (a remainder under 1 ms waits 1 ms). A goroutine's 1 ms
// sleep is on time when the process goes idle as it starts, and longer by
// about each round trip another goroutine makes after it started: what a
// fair lock's previous holder does as it queues again, and an unfair
// lock's retaking releaser does not.
func timerProbe(addr string) {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1})
	defer rdb.Close()
	check(rdb.Ping(ctx).Err())
	fmt.Println("| round trips by another goroutine as the sleep starts | 1 ms sleep took, p50 | p90 |")
	fmt.Println("| --- | --- | --- |")
	for trips := range 4 {
		took := make([]time.Duration, 0, 2000)
		for range 2000 {
			slept := make(chan time.Duration)
			go func() {
				start := time.Now()
				time.Sleep(time.Millisecond)
				slept <- time.Since(start)
			}()
			for range trips {
				check(rdb.Ping(ctx).Err())
			}
			took = append(took, <-slept)
		}
		fmt.Printf("| %d | %.3f ms | %.3f ms |\n", trips, float64(percentile(took, 0.5).Microseconds())/1000,
			float64(percentile(took, 0.9).Microseconds())/1000)
	}
}
