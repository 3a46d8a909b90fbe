package placement

import (
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

func matchLabels(kv ...string) *metav1.LabelSelector {
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return &metav1.LabelSelector{MatchLabels: m}
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
		{name: "by expression", placement: policyhubv1.Placement{ClusterSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "region", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"us"}},
		}}}, wantCluster: []string{"eu-prod", "eu-staging"}},
		{name: "selector matching nothing", placement: policyhubv1.Placement{ClusterSelector: matchLabels("env", "dev")}},
		{name: "by OCM placement", placement: policyhubv1.Placement{PlacementRef: &policyhubv1.PlacementRef{Namespace: "ocm", Name: "us-only"}}, wantCluster: []string{"us-prod"}},
		{name: "OCM decision for a cluster the gateway lacks", placement: policyhubv1.Placement{PlacementRef: &policyhubv1.PlacementRef{Namespace: "ocm", Name: "has-ghosts"}}, wantCluster: []string{"eu-prod"}, wantUnknown: []string{"ghost"}},
		{name: "OCM placement without decisions", placement: policyhubv1.Placement{PlacementRef: &policyhubv1.PlacementRef{Namespace: "ocm", Name: "none"}}},
		{name: "union of all three, without duplicates", placement: policyhubv1.Placement{
			Clusters:        []string{"eu-staging"},
			ClusterSelector: matchLabels("region", "eu"),
			PlacementRef:    &policyhubv1.PlacementRef{Namespace: "ocm", Name: "us-only"},
		}, wantCluster: []string{"eu-prod", "eu-staging", "us-prod"}},
		{name: "empty selector is refused", placement: policyhubv1.Placement{ClusterSelector: &metav1.LabelSelector{}}, wantErr: "would select every cluster"},
		{name: "invalid selector is refused", placement: policyhubv1.Placement{ClusterSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "env", Operator: "Near", Values: []string{"prod"}},
		}}}, wantErr: "placement.clusterSelector"},
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
			spec: policyhubv1.FleetPolicySpec{Placement: all, Mode: &enforce, DryRun: true},
			want: []Target{{Cluster: "eu-prod", Mode: &enforce, DryRun: true}, {Cluster: "eu-staging", Mode: &enforce, DryRun: true}},
		},
		{
			name: "dry-run in prod, enforce in staging",
			spec: policyhubv1.FleetPolicySpec{Placement: all, Mode: &enforce, ClusterOverrides: []policyhubv1.ClusterOverride{
				{ClusterSelector: matchLabels("env", "prod"), DryRun: &yes},
			}},
			want: []Target{{Cluster: "eu-prod", Mode: &enforce, DryRun: true}, {Cluster: "eu-staging", Mode: &enforce}},
		},
		{
			name: "exclude by name",
			spec: policyhubv1.FleetPolicySpec{Placement: allPlusUS, ClusterOverrides: []policyhubv1.ClusterOverride{
				{Clusters: []string{"eu-staging"}, Exclude: true},
			}},
			want: []Target{{Cluster: "eu-prod"}, {Cluster: "us-prod"}},
		},
		{
			name: "later override wins field by field",
			spec: policyhubv1.FleetPolicySpec{Placement: all, Mode: &enforce, DryRun: true, ClusterOverrides: []policyhubv1.ClusterOverride{
				{ClusterSelector: matchLabels("region", "eu"), Mode: &audit, DryRun: &no},
				{Clusters: []string{"eu-prod"}, Mode: &enforce},
			}},
			want: []Target{{Cluster: "eu-prod", Mode: &enforce}, {Cluster: "eu-staging", Mode: &audit}},
		},
		{
			name: "override of a cluster the placement does not select adds nothing",
			spec: policyhubv1.FleetPolicySpec{Placement: all, ClusterOverrides: []policyhubv1.ClusterOverride{
				{Clusters: []string{"us-prod"}, Mode: &audit},
			}},
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
