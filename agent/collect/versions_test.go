package collect

import (
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The agent reads each CEL kind at the newest version the cluster serves: v1beta1 on Kyverno
// 1.16, which serves no v1, and v1 once the cluster serves it (Kyverno upgraded; discovery runs
// again and the kind is read again at v1). A discovery error is passed on, never read as "none".
func TestPreferredVersion(t *testing.T) {
	validating := PolicyKinds[2]
	if validating.Kind != "ValidatingPolicy" {
		t.Fatalf("PolicyKinds[2] is %s", validating.Kind)
	}
	failed := errors.New("discovery failed")
	for _, tt := range []struct {
		name    string
		served  []string
		err     error
		want    string
		wantErr bool
	}{
		{name: "Kyverno 1.16 serves v1beta1 only", served: []string{"v1alpha1", "v1beta1"}, want: "v1beta1"},
		{name: "Kyverno 1.17 to 1.19 serve both", served: []string{"v1alpha1", "v1beta1", "v1"}, want: "v1"},
		{name: "Kyverno 1.20 serves v1", served: []string{"v1"}, want: "v1"},
		{name: "no Kyverno", want: ""},
		{name: "only an unknown version", served: []string{"v2alpha1"}, want: ""},
		{name: "discovery fails", err: failed, wantErr: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			served := func(gvr schema.GroupVersionResource) (bool, error) {
				if tt.err != nil {
					return false, tt.err
				}
				if gvr.GroupResource() != validating.GroupResource {
					t.Errorf("asked about %s", gvr)
				}
				for _, v := range tt.served {
					if v == gvr.Version {
						return true, nil
					}
				}
				return false, nil
			}
			got, err := preferredVersion(validating, served)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("preferredVersion = %q, %v; want %q (error %v)", got, err, tt.want, tt.wantErr)
			}
		})
	}
}
