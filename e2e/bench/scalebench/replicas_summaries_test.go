package main

import (
	"encoding/json"
	"testing"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// BenchmarkSummaryDecoded is what one of the replicas scenario's summaries costs a cache that
// holds it: the bytes allocated decoding its JSON into the typed object an informer keeps (an
// upper bound: the decoder's own garbage is counted too). A replica caching only the summaries
// of the clusters it works saves this for each of the other replicas' clusters.
func BenchmarkSummaryDecoded(b *testing.B) {
	u, err := replicaSummary("rc-0000")
	if err != nil {
		b.Fatal(err)
	}
	raw, err := json.Marshal(u.Object)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		s := &policyhubv1.PolicyReportSummary{}
		if err := json.Unmarshal(raw, s); err != nil {
			b.Fatal(err)
		}
	}
}
