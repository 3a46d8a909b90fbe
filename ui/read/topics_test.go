package read

import (
	"fmt"
	"slices"
	"testing"
)

func TestBrokerCoalescesAndBounds(t *testing.T) {
	b := NewBroker()
	s := b.Subscribe()
	defer s.Close()
	b.Publish("cluster/a")
	b.Publish("cluster/a")
	b.Publish("cluster/b")
	select {
	case <-s.Ready:
	default:
		t.Fatal("no signal after a publish")
	}
	got := s.Take()
	slices.Sort(got)
	if !slices.Equal(got, []string{"cluster/a", "cluster/b"}) {
		t.Errorf("Take = %q, want each topic once", got)
	}
	if got := s.Take(); len(got) != 0 {
		t.Errorf("second Take = %q, want nothing", got)
	}
	for i := range maxPending + 10 {
		b.Publish(fmt.Sprintf("cluster/%d", i))
	}
	if got := s.Take(); !slices.Equal(got, []string{TopicAll}) {
		t.Errorf("after %d topics Take = %d topics, want only %q", maxPending+10, len(got), TopicAll)
	}
	s.Close()
	b.Publish("cluster/a") // a closed subscription is no longer told
	if got := s.Take(); len(got) != 0 {
		t.Errorf("closed subscription took %q", got)
	}
}
