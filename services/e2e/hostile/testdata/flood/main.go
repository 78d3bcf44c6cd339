// Command flood is the hostile suite's unauthenticated client: -clients
// clients each send token-less requests (-method, -url, body "{}") one after
// the other, as fast as they are answered, until its standard input closes;
// then it prints one line, SENT calls failed status=count..., and exits.
// The suite runs it as its own process at the lowest CPU priority, so that
// what it costs the server, not what its own sending costs the machine, is
// what the server's other callers feel.
package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	clients := flag.Int("clients", 4, "concurrent clients")
	method := flag.String("method", http.MethodPost, "HTTP method")
	url := flag.String("url", "", "URL to send to")
	flag.Parse()
	if *url == "" {
		fmt.Fprintln(os.Stderr, "flood: -url is required")
		os.Exit(2)
	}
	var stop atomic.Bool
	var sent, failed atomic.Int64
	var mu sync.Mutex
	codes := map[int]int64{}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *clients}, Timeout: 10 * time.Second}
	var wg sync.WaitGroup
	for range *clients {
		wg.Go(func() {
			for !stop.Load() {
				sent.Add(1)
				req, _ := http.NewRequest(*method, *url, strings.NewReader("{}"))
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					failed.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				mu.Lock()
				codes[resp.StatusCode]++
				mu.Unlock()
			}
		})
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	stop.Store(true)
	wg.Wait()
	var keys []int
	for c := range codes {
		keys = append(keys, c)
	}
	sort.Ints(keys)
	fmt.Printf("SENT %d %d", sent.Load(), failed.Load())
	for _, c := range keys {
		fmt.Printf(" %d=%d", c, codes[c])
	}
	fmt.Println()
}
