// The corpus's Go program (Go's own linker; CFI in .debug_frame): deep calls, a closure called
// back by sort.Slice, a map, formatting.
package main

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"syscall"
	"time"
)

//go:noinline
func leaf(n uint64) uint64 {
	var s uint64
	for i := uint64(0); i < n; i++ {
		s += i*i ^ (s >> 3)
	}
	return s
}

//go:noinline
func descend(depth int, n uint64) uint64 {
	if depth == 0 {
		return leaf(n)
	}
	return descend(depth-1, n) + uint64(depth)
}

// cpuTime is the process's CPU time (user + system): the loop runs for CPU seconds, so a loaded
// machine records as many cpu-clock samples as an idle one.
func cpuTime() time.Duration {
	var usage syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &usage) != nil {
		return 0
	}
	return time.Duration(usage.Utime.Nano() + usage.Stime.Nano())
}

func main() {
	seconds := 0.5
	if len(os.Args) > 1 {
		if s, err := strconv.ParseFloat(os.Args[1], 64); err == nil {
			seconds = s
		}
	}
	end := cpuTime() + time.Duration(seconds*float64(time.Second))
	counts := map[string]int{}
	var sink uint64
	for cpuTime() < end {
		sink += descend(6, 2000)
		numbers := make([]int, 256)
		for i := range numbers {
			numbers[i] = (i * 7919) % 256
		}
		sort.Slice(numbers, func(a, b int) bool {
			sink += leaf(50)
			return numbers[a] < numbers[b]
		})
		counts[fmt.Sprintf("key%d", sink%64)]++
	}
	fmt.Println(sink, len(counts))
}
