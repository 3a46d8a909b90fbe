package benchkit

import "sync"

// InParallel runs work(i) for i in [0, count), n at a time, and returns the errors in the order
// they happened (none: nil). Every i runs even after an error, so the feeder never blocks; what
// to report (the first error, all of them) is the caller's choice.
func InParallel(n, count int, work func(i int) error) []error {
	next := make(chan int)
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for i := range next {
				if err := work(i); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for i := range count {
		next <- i
	}
	close(next)
	wg.Wait()
	return errs
}
