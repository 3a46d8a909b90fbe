package placement

import (
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

var fleet = Inventory{
	Clusters: []Cluster{
		{Name: "eu-prod", Labels: map[string]string{"env": "prod", "region": "eu"}},
		{Name: "eu-staging", Labels: map[string]string{"env": "staging", "region": "eu"}},
		{Name: "us-prod", Labels: map[string]string{"env": "prod", "region": "us"}},
	},
	Decisions: map[types.NamespacedName][]string{
		{Namespace: "ocm", Name: "us-only"}:    {"us-prod"},
		{Namespace: "ocm", Name: "has-ghosts"}: {"eu-prod", "ghost"},
	},
}

func matchLabels(kv ...string) *policyhubv1.ClusterSelector {
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return &policyhubv1.ClusterSelector{MatchLabels: m}
}

// matchExpressions is a selector of requirements given as key, operator, values... triples
// (values comma-separated, "" for none).
func matchExpressions(kov ...string) *policyhubv1.ClusterSelector {
	sel := &policyhubv1.ClusterSelector{}
	for i := 0; i < len(kov); i += 3 {
		r := metav1.LabelSelectorRequirement{Key: kov[i], Operator: metav1.LabelSelectorOperator(kov[i+1])}
		if kov[i+2] != "" {
			r.Values = strings.Split(kov[i+2], ",")
		}
		sel.MatchExpressions = append(sel.MatchExpressions, r)
	}
	return sel
}

func TestSelect(t *testing.T) {
	tests := []struct {
		name        string
		placement   policyhubv1.Placement
		wantCluster []string
		wantUnknown []string
		wantErr     string
	}{
		{name: "empty placement selects nothing", placement: policyhubv1.Placement{}},
		{name: "by name", placement: policyhubv1.Placement{Clusters: []string{"us-prod", "eu-prod"}}, wantCluster: []string{"eu-prod", "us-prod"}},
		{name: "unknown name is reported, not selected", placement: policyhubv1.Placement{Clusters: []string{"eu-prod", "nope"}}, wantCluster: []string{"eu-prod"}, wantUnknown: []string{"nope"}},
		{name: "by labels", placement: policyhubv1.Placement{ClusterSelector: matchLabels("env", "prod")}, wantCluster: []string{"eu-prod", "us-prod"}},
		{name: "by expression", placement: policyhubv1.Placement{ClusterSelector: matchExpressions("region", "Exists", "", "region", "NotIn", "us")},
			wantCluster: []string{"eu-prod", "eu-staging"}},
		{name: "selector matching nothing", placement: policyhubv1.Placement{ClusterSelector: matchLabels("env", "dev")}},
		{name: "by OCM placement", placement: policyhubv1.Placement{PlacementRef: &policyhubv1.PlacementRef{Namespace: "ocm", Name: "us-only"}}, wantCluster: []string{"us-prod"}},
		{name: "OCM decision for a cluster the gateway lacks", placement: policyhubv1.Placement{PlacementRef: &policyhubv1.PlacementRef{Namespace: "ocm", Name: "has-ghosts"}}, wantCluster: []string{"eu-prod"}, wantUnknown: []string{"ghost"}},
		{name: "OCM placement without decisions", placement: policyhubv1.Placement{PlacementRef: &policyhubv1.PlacementRef{Namespace: "ocm", Name: "none"}}},
		{name: "union of all three, without duplicates", placement: policyhubv1.Placement{
			Clusters:        []string{"eu-staging"},
			ClusterSelector: matchLabels("region", "eu"),
			PlacementRef:    &policyhubv1.PlacementRef{Namespace: "ocm", Name: "us-only"},
		}, wantCluster: []string{"eu-prod", "eu-staging", "us-prod"}},
		{name: "empty selector is refused", placement: policyhubv1.Placement{ClusterSelector: &policyhubv1.ClusterSelector{}}, wantErr: "placement.clusterSelector: empty selector would select every cluster"},
		{name: "selector of DoesNotExist alone is refused", placement: policyhubv1.Placement{ClusterSelector: matchExpressions("decommissioned", "DoesNotExist", "")},
			wantErr: "placement.clusterSelector: selector has only NotIn or DoesNotExist requirements"},
		{name: "invalid selector is refused", placement: policyhubv1.Placement{ClusterSelector: matchExpressions("env", "Near", "prod")}, wantErr: "placement.clusterSelector"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, unknown, err := Select(tt.placement, fleet, "")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.wantCluster) {
				t.Errorf("selected %v, want %v", got, tt.wantCluster)
			}
			if !reflect.DeepEqual(unknown, tt.wantUnknown) {
				t.Errorf("unknown %v, want %v", unknown, tt.wantUnknown)
			}
		})
	}
}

func TestSelectDefaultsPlacementRefNamespace(t *testing.T) {
	got, _, err := Select(policyhubv1.Placement{PlacementRef: &policyhubv1.PlacementRef{Name: "us-only"}}, fleet, "ocm")
	if err != nil || !reflect.DeepEqual(got, []string{"us-prod"}) {
		t.Fatalf("Select = %v, %v; want [us-prod] from the default namespace's Placement", got, err)
	}
}

func TestFleetPolicyOverrides(t *testing.T) {
	enforce, audit := policyhubv1.ModeEnforce, policyhubv1.ModeAudit
	yes, no := true, false
	all := policyhubv1.Placement{ClusterSelector: matchLabels("region", "eu")}
	allPlusUS := policyhubv1.Placement{Clusters: []string{"us-prod"}, ClusterSelector: matchLabels("region", "eu")}
	tests := []struct {
		name string
		spec policyhubv1.FleetPolicySpec
		want []Target
	}{
		{
			name: "spec mode and dry-run everywhere",
			spec: policyhubv1.FleetPolicySpec{Delivery: policyhubv1.Delivery{Placement: all, Mode: &enforce, DryRun: true}},
			want: []Target{{Cluster: "eu-prod", Mode: &enforce, DryRun: true}, {Cluster: "eu-staging", Mode: &enforce, DryRun: true}},
		},
		{
			name: "dry-run in prod, enforce in staging",
			spec: policyhubv1.FleetPolicySpec{Delivery: policyhubv1.Delivery{Placement: all, Mode: &enforce, ClusterOverrides: []policyhubv1.ClusterOverride{
				{ClusterSelector: matchLabels("env", "prod"), DryRun: &yes},
			}}},
			want: []Target{{Cluster: "eu-prod", Mode: &enforce, DryRun: true}, {Cluster: "eu-staging", Mode: &enforce}},
		},
		{
			name: "exclude by name",
			spec: policyhubv1.FleetPolicySpec{Delivery: policyhubv1.Delivery{Placement: allPlusUS, ClusterOverrides: []policyhubv1.ClusterOverride{
				{Clusters: []string{"eu-staging"}, Exclude: true},
			}}},
			want: []Target{{Cluster: "eu-prod"}, {Cluster: "us-prod"}},
		},
		{
			name: "later override wins field by field",
			spec: policyhubv1.FleetPolicySpec{Delivery: policyhubv1.Delivery{Placement: all, Mode: &enforce, DryRun: true, ClusterOverrides: []policyhubv1.ClusterOverride{
				{ClusterSelector: matchLabels("region", "eu"), Mode: &audit, DryRun: &no},
				{Clusters: []string{"eu-prod"}, Mode: &enforce},
			}}},
			want: []Target{{Cluster: "eu-prod", Mode: &enforce}, {Cluster: "eu-staging", Mode: &audit}},
		},
		{
			name: "override of a cluster the placement does not select adds nothing",
			spec: policyhubv1.FleetPolicySpec{Delivery: policyhubv1.Delivery{Placement: all, ClusterOverrides: []policyhubv1.ClusterOverride{
				{Clusters: []string{"us-prod"}, Mode: &audit},
			}}},
			want: []Target{{Cluster: "eu-prod"}, {Cluster: "eu-staging"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FleetPolicy(tt.spec, fleet)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.Targets, tt.want) {
				t.Errorf("targets %s, want %s", describe(got.Targets), describe(tt.want))
			}
		})
	}
}

// A selector must require a label: one that does not selects every cluster (without some
// label), the whole fleet by accident. Objects stored before admission refused such selectors
// reach the hub's code, which refuses them too.
func TestSelector(t *testing.T) {
	tests := []struct {
		name     string
		selector *policyhubv1.ClusterSelector
		want     []string // the fleet's clusters it selects
		wantErr  string
	}{
		{name: "matchLabels", selector: matchLabels("env", "prod"), want: []string{"eu-prod", "us-prod"}},
		{name: "In", selector: matchExpressions("region", "In", "eu"), want: []string{"eu-prod", "eu-staging"}},
		{name: "Exists", selector: matchExpressions("env", "Exists", ""), want: []string{"eu-prod", "eu-staging", "us-prod"}},
		{name: "NotIn with a positive requirement", selector: matchExpressions("env", "NotIn", "staging", "region", "In", "eu"), want: []string{"eu-prod"}},
		{name: "DoesNotExist with matchLabels", selector: &policyhubv1.ClusterSelector{
			MatchLabels:      map[string]string{"env": "prod"},
			MatchExpressions: matchExpressions("canary", "DoesNotExist", "").MatchExpressions,
		}, want: []string{"eu-prod", "us-prod"}},
		{name: "empty", selector: &policyhubv1.ClusterSelector{}, wantErr: "empty selector would select every cluster"},
		{name: "empty lists", selector: &policyhubv1.ClusterSelector{MatchLabels: map[string]string{}, MatchExpressions: []metav1.LabelSelectorRequirement{}},
			wantErr: "empty selector would select every cluster"},
		{name: "DoesNotExist alone", selector: matchExpressions("x", "DoesNotExist", ""), wantErr: "only NotIn or DoesNotExist requirements"},
		{name: "NotIn alone", selector: matchExpressions("env", "NotIn", "staging"), wantErr: "only NotIn or DoesNotExist requirements"},
		{name: "NotIn and DoesNotExist", selector: matchExpressions("env", "NotIn", "dev", "x", "DoesNotExist", ""), wantErr: "only NotIn or DoesNotExist requirements"},
		{name: "operators are case-sensitive", selector: matchExpressions("env", "in", "prod"), wantErr: "only NotIn or DoesNotExist requirements"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sel, err := Selector(tt.selector)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range fleet.Clusters {
				if sel.Matches(labels.Set(c.Labels)) {
					got = append(got, c.Name)
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("selected %v, want %v", got, tt.want)
			}
		})
	}
}

// A cluster override's selector is held to the placement's rule, its error naming the override.
func TestFleetPolicyOverrideSelectorRequiresLabel(t *testing.T) {
	audit := policyhubv1.ModeAudit
	spec := policyhubv1.FleetPolicySpec{Delivery: policyhubv1.Delivery{Placement: policyhubv1.Placement{ClusterSelector: matchLabels("region", "eu")}, ClusterOverrides: []policyhubv1.ClusterOverride{
		{Clusters: []string{"eu-prod"}, Mode: &audit},
		{ClusterSelector: matchExpressions("canary", "DoesNotExist", ""), Exclude: true},
	}}}
	_, err := FleetPolicy(spec, fleet)
	if err == nil || !strings.Contains(err.Error(), "clusterOverrides[1].clusterSelector: selector has only NotIn or DoesNotExist requirements") {
		t.Fatalf("error = %v, want one naming clusterOverrides[1].clusterSelector", err)
	}
	spec.ClusterOverrides[1].ClusterSelector = &policyhubv1.ClusterSelector{}
	if _, err := FleetPolicy(spec, fleet); err == nil || !strings.Contains(err.Error(), "clusterOverrides[1].clusterSelector: empty selector") {
		t.Fatalf("error = %v, want one naming clusterOverrides[1].clusterSelector", err)
	}
}

func describe(targets []Target) string {
	var parts []string
	for _, t := range targets {
		mode := "template"
		if t.Mode != nil {
			mode = string(*t.Mode)
		}
		parts = append(parts, t.Cluster+"("+mode+",dryRun="+map[bool]string{true: "yes", false: "no"}[t.DryRun]+")")
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func TestMissingPlacement(t *testing.T) {
	ref := func(ns, name string) policyhubv1.Placement {
		return policyhubv1.Placement{PlacementRef: &policyhubv1.PlacementRef{Namespace: ns, Name: name}}
	}
	withOCM := Inventory{
		OCM:        true,
		Placements: map[types.NamespacedName]bool{{Namespace: "ocm", Name: "prod"}: true},
		Decisions:  map[types.NamespacedName][]string{{Namespace: "ocm", Name: "orphan"}: {"c1"}},
	}
	for _, tc := range []struct {
		name      string
		placement policyhubv1.Placement
		inv       Inventory
		defaultNS string
		want      string
	}{
		{"no placementRef", policyhubv1.Placement{Clusters: []string{"c1"}}, withOCM, "", ""},
		{"the Placement exists", ref("ocm", "prod"), withOCM, "", ""},
		{"the namespace defaults", ref("", "prod"), withOCM, "ocm", ""},
		{"decisions without their Placement are trusted", ref("ocm", "orphan"), withOCM, "", ""},
		{"missing", ref("ocm", "staging"), withOCM, "", "spec.placement.placementRef: the OCM Placement ocm/staging does not exist"},
		{"no OCM on the hub", ref("ocm", "prod"), Inventory{}, "", "spec.placement.placementRef names the OCM Placement ocm/prod, but the hub does not serve OCM's Placement API (open-cluster-management.io is not installed)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := MissingPlacement(tc.placement, tc.inv, tc.defaultNS, "spec.placement"); got != tc.want {
				t.Errorf("MissingPlacement = %q, want %q", got, tc.want)
			}
		})
	}
}
