package evaluate

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// paged stops at its bound and says whether items were left, whatever the server pages.
func TestPaged(t *testing.T) {
	for _, tc := range []struct {
		total, page, max int
		wantTaken        int
		wantMore         bool
	}{
		{total: 0, page: 10, max: 5, wantTaken: 0},
		{total: 5, page: 10, max: 5, wantTaken: 5},
		{total: 6, page: 10, max: 5, wantTaken: 5, wantMore: true},
		{total: 25, page: 10, max: 100, wantTaken: 25},
		{total: 25, page: 10, max: 20, wantTaken: 20, wantMore: true},
		{total: 20, page: 10, max: 20, wantTaken: 20},
	} {
		t.Run(fmt.Sprint(tc), func(t *testing.T) {
			taken, requests := 0, 0
			more, err := paged(context.Background(), int64(tc.page), tc.max, func(_ context.Context, o metav1.ListOptions) (int, string, error) {
				requests++
				start := 0
				fmt.Sscan(o.Continue, &start)
				n := min(int(o.Limit), tc.total-start)
				for i := 0; i < n && taken < tc.max; i++ {
					taken++
				}
				next := ""
				if start+n < tc.total {
					next = fmt.Sprint(start + n)
				}
				return n, next, nil
			})
			if err != nil || taken != tc.wantTaken || more != tc.wantMore {
				t.Errorf("taken %d, more %v (%v); want %d, %v", taken, more, err, tc.wantTaken, tc.wantMore)
			}
			if requests > tc.max/tc.page+2 {
				t.Errorf("%d requests", requests)
			}
		})
	}
}
