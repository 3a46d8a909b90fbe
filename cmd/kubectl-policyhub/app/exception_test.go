package app

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

var exceptionNow = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

// validRequest is a complete request for a FleetPolicy's policy; the cases change one thing.
func validRequest() exceptionRequest {
	return exceptionRequest{
		policy: "disallow-latest-tag", namespaces: []string{"shop"}, kinds: []string{"Deployment"}, names: []string{"web"},
		clusters: []string{"cluster-1", "cluster-2"}, owner: "team-shop", reason: "pinned next sprint", ticket: "SHOP-1234",
		expiresIn: "72h",
	}
}

func TestExceptionRequestBuild(t *testing.T) {
	expires := func(d time.Duration) metav1.Time { return metav1.NewTime(exceptionNow.Add(d)) }
	for _, tc := range []struct {
		name   string
		change func(r *exceptionRequest)
		want   policyhubv1.FleetPolicyExceptionSpec
	}{
		{"a FleetPolicy's policy in named clusters", func(*exceptionRequest) {}, policyhubv1.FleetPolicyExceptionSpec{
			Target:    policyhubv1.ExceptionTarget{Kind: kindFleetPolicy, Name: "disallow-latest-tag"},
			Resources: policyhubv1.ExceptionResources{Namespaces: []string{"shop"}, Kinds: []string{"Deployment"}, Names: []string{"web"}},
			Clusters:  policyhubv1.ExceptionClusters{Names: []string{"cluster-1", "cluster-2"}},
			Owner:     "team-shop", Reason: "pinned next sprint", Ticket: "SHOP-1234", ExpiresAt: expires(72 * time.Hour),
		}},
		{"a PolicySet member's rules, by labels, until a date", func(r *exceptionRequest) {
			r.policy, r.member, r.rules = "pset/pss-baseline", "clusterpolicy/disallow-privileged-containers", []string{"privileged-*", " autogen-privileged-* ", "privileged-*"}
			r.namespaces, r.kinds, r.names, r.selector = nil, nil, nil, "app=gpu-runner,tier in (b,a)"
			r.clusters, r.clusterSelector = nil, "env=staging"
			r.owner, r.expiresIn, r.expiresAt = "  team-batch ", "", "2030-03-01T00:00:00Z"
		}, policyhubv1.FleetPolicyExceptionSpec{
			Target: policyhubv1.ExceptionTarget{Kind: kindPolicySet, Name: "pss-baseline",
				Member: &policyhubv1.MemberRef{Kind: "ClusterPolicy", Name: "disallow-privileged-containers"},
				Rules:  []string{"privileged-*", "autogen-privileged-*"}},
			Resources: policyhubv1.ExceptionResources{Selector: &policyhubv1.ClusterSelector{MatchLabels: map[string]string{"app": "gpu-runner"},
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}}}}},
			Clusters: policyhubv1.ExceptionClusters{ClusterSelector: &policyhubv1.ClusterSelector{MatchLabels: map[string]string{"env": "staging"}}},
			Owner:    "team-batch", Reason: "pinned next sprint", Ticket: "SHOP-1234",
			ExpiresAt: metav1.NewTime(time.Date(2030, 3, 1, 0, 0, 0, 0, time.UTC)),
		}},
		{"CEL conditions alone", func(r *exceptionRequest) {
			r.namespaces, r.kinds, r.names = nil, nil, nil
			r.matchConditions = []string{"edge = object.metadata.labels['tier'] == 'edge'"}
		}, policyhubv1.FleetPolicyExceptionSpec{
			Target:    policyhubv1.ExceptionTarget{Kind: kindFleetPolicy, Name: "disallow-latest-tag"},
			Resources: policyhubv1.ExceptionResources{MatchConditions: []policyhubv1.ExceptionMatchCondition{{Name: "edge", Expression: "object.metadata.labels['tier'] == 'edge'"}}},
			Clusters:  policyhubv1.ExceptionClusters{Names: []string{"cluster-1", "cluster-2"}},
			Owner:     "team-shop", Reason: "pinned next sprint", Ticket: "SHOP-1234", ExpiresAt: expires(72 * time.Hour),
		}},
		{"every cluster, whole days, a namespaced member", func(r *exceptionRequest) {
			r.policy, r.member = "policyset/pss", "NamespacedValidatingPolicy/shop/limits"
			r.kinds, r.names = nil, nil
			r.clusters, r.allClusters, r.expiresIn = nil, true, "14d"
		}, policyhubv1.FleetPolicyExceptionSpec{
			Target: policyhubv1.ExceptionTarget{Kind: kindPolicySet, Name: "pss",
				Member: &policyhubv1.MemberRef{Kind: "NamespacedValidatingPolicy", Namespace: "shop", Name: "limits"}},
			Resources: policyhubv1.ExceptionResources{Namespaces: []string{"shop"}},
			Clusters:  policyhubv1.ExceptionClusters{ClusterSelector: &policyhubv1.ClusterSelector{}},
			Owner:     "team-shop", Reason: "pinned next sprint", Ticket: "SHOP-1234", ExpiresAt: expires(14 * 24 * time.Hour),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := validRequest()
			tc.change(&r)
			ex, err := r.build("shop", "shop-web", exceptionNow)
			if err != nil {
				t.Fatal(err)
			}
			if ex.Namespace != "shop" || ex.Name != "shop-web" || ex.Kind != policyhubv1.KindFleetPolicyException || ex.APIVersion != "policyhub.io/v1alpha1" {
				t.Errorf("object %+v %+v", ex.TypeMeta, ex.ObjectMeta)
			}
			if diff := cmp.Diff(tc.want, ex.Spec); diff != "" {
				t.Errorf("spec (-want +got):\n%s", diff)
			}
		})
	}
}

// Each mistake is a usage error naming the flag, found before the hub is asked.
func TestExceptionRequestRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(r *exceptionRequest)
		flag   string
	}{
		{"bad name", func(*exceptionRequest) {}, "NAME"},
		{"no policy", func(r *exceptionRequest) { r.policy = "" }, "--policy is required"},
		{"an ApplicationPolicy", func(r *exceptionRequest) { r.policy = "ap/shop-limits" }, "--policy"},
		{"an unknown type", func(r *exceptionRequest) { r.policy = "deploy/web" }, "--policy"},
		{"a PolicySet without member", func(r *exceptionRequest) { r.policy = "pset/pss" }, "--member is required"},
		{"a member of a FleetPolicy", func(r *exceptionRequest) { r.member = "ClusterPolicy/x" }, "--member"},
		{"a member without name", func(r *exceptionRequest) { r.policy, r.member = "pset/pss", "ClusterPolicy" }, "--member"},
		{"a member with too many parts", func(r *exceptionRequest) { r.policy, r.member = "pset/pss", "a/b/c/d" }, "--member"},
		{"a member with an empty part", func(r *exceptionRequest) { r.policy, r.member = "pset/pss", "Policy//x" }, "--member"},
		{"rules of a CEL policy", func(r *exceptionRequest) {
			r.policy, r.member, r.rules = "pset/pss", "ValidatingPolicy/x", []string{"r"}
		}, "--rules"},
		{"an empty rule", func(r *exceptionRequest) { r.rules = []string{"a", ""} }, "--rules"},
		{"an empty namespace", func(r *exceptionRequest) { r.namespaces = []string{" "} }, "--namespaces"},
		{"an empty kind", func(r *exceptionRequest) { r.kinds = []string{""} }, "--kinds"},
		{"an empty name", func(r *exceptionRequest) { r.names = []string{"web", ""} }, "--names"},
		{"kinds alone", func(r *exceptionRequest) { r.namespaces, r.names = nil, nil }, "--selector"},
		{"a match condition without its name", func(r *exceptionRequest) { r.matchConditions = []string{"object.kind == 'Pod'"} }, "--match-condition"},
		{"a match condition named like the hub's", func(r *exceptionRequest) { r.matchConditions = []string{"policyhub-names=true"} }, "--match-condition"},
		{"a match condition calling http.Get", func(r *exceptionRequest) {
			r.matchConditions = []string{"edge=object.metadata.name == 'web'", "leak=http.Get('http://192.0.2.2/') != null"}
		}, "--match-condition: spec.resources.matchConditions[1].expression: calls http.Get, which a tenant's CEL may not"},
		{"a match condition reading params", func(r *exceptionRequest) { r.matchConditions = []string{"p=params.allowed"} }, "reads params"},
		{"a bad selector", func(r *exceptionRequest) { r.selector = "app in (" }, "--selector"},
		{"an unsupported operator", func(r *exceptionRequest) { r.selector = "replicas>1" }, "--selector"},
		{"no clusters", func(r *exceptionRequest) { r.clusters = nil }, "--all-clusters"},
		{"clusters and every cluster", func(r *exceptionRequest) { r.allClusters = true }, "--all-clusters"},
		{"clusters and a selector", func(r *exceptionRequest) { r.clusterSelector = "env=prod" }, "--cluster-selector"},
		{"an empty cluster name", func(r *exceptionRequest) { r.clusters = []string{"a", " "} }, "--clusters"},
		{"a bad cluster selector", func(r *exceptionRequest) { r.clusters, r.clusterSelector = nil, "env=a,env=b" }, "--cluster-selector"},
		{"no owner", func(r *exceptionRequest) { r.owner = "  " }, "--owner"},
		{"a long owner", func(r *exceptionRequest) { r.owner = strings.Repeat("o", maxOwnerLength+1) }, "--owner"},
		{"no reason", func(r *exceptionRequest) { r.reason = "" }, "--reason"},
		{"no ticket", func(r *exceptionRequest) { r.ticket = "" }, "--ticket"},
		{"no end", func(r *exceptionRequest) { r.expiresIn = "" }, "--expires-in"},
		{"two ends", func(r *exceptionRequest) { r.expiresAt = "2030-02-01T00:00:00Z" }, "--expires-at"},
		{"a bad duration", func(r *exceptionRequest) { r.expiresIn = "3x" }, "--expires-in"},
		{"bad days", func(r *exceptionRequest) { r.expiresIn = "1.5d" }, "--expires-in"},
		{"a negative duration", func(r *exceptionRequest) { r.expiresIn = "-1h" }, "--expires-in"},
		{"no duration", func(r *exceptionRequest) { r.expiresIn = "0s" }, "--expires-in"},
		{"a bad date", func(r *exceptionRequest) { r.expiresIn, r.expiresAt = "", "2030-02-01" }, "--expires-at"},
		{"a past date", func(r *exceptionRequest) { r.expiresIn, r.expiresAt = "", "2029-12-31T00:00:00Z" }, "--expires-at"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := validRequest()
			tc.change(&r)
			name := "shop-web"
			if tc.flag == "NAME" {
				name = "Shop_Web"
			}
			_, err := r.build("shop", name, exceptionNow)
			var ue usageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.flag) {
				t.Errorf("%v; want a usage error naming %s", err, tc.flag)
			}
		})
	}
}

func TestParseMember(t *testing.T) {
	for arg, want := range map[string]policyhubv1.MemberRef{
		"ClusterPolicy/require-labels":  {Kind: "ClusterPolicy", Name: "require-labels"},
		"clusterpolicy/require-labels":  {Kind: "ClusterPolicy", Name: "require-labels"},
		"policy/shop/limits":            {Kind: "Policy", Namespace: "shop", Name: "limits"},
		"validatingpolicy/no-latest":    {Kind: "ValidatingPolicy", Name: "no-latest"},
		"SomeFutureKind/x":              {Kind: "SomeFutureKind", Name: "x"},
		"NamespacedDeletingPolicy/ns/x": {Kind: "NamespacedDeletingPolicy", Namespace: "ns", Name: "x"},
	} {
		got, err := parseMember(arg)
		if err != nil || *got != want {
			t.Errorf("%q: %+v, %v; want %+v", arg, got, err, want)
		}
	}
	for _, arg := range []string{"", "x", "/x", "k/", "k//x", "a/b/c/d"} {
		var ue usageError
		if _, err := parseMember(arg); !errors.As(err, &ue) || !strings.Contains(err.Error(), "--member") {
			t.Errorf("%q: %v, want a usage error naming --member", arg, err)
		}
	}
}

// A selector flag becomes the API's selector, which selects what kubectl's -l would.
func TestParseSelector(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want policyhubv1.ClusterSelector
		// matches and misses are label sets the selector must select and not select.
		matches, misses []labels.Set
	}{
		{"app=web", policyhubv1.ClusterSelector{MatchLabels: map[string]string{"app": "web"}},
			[]labels.Set{{"app": "web", "x": "y"}}, []labels.Set{{"app": "db"}, {}}},
		{"app==web,tier in (b,a)", policyhubv1.ClusterSelector{MatchLabels: map[string]string{"app": "web"},
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}}}},
			[]labels.Set{{"app": "web", "tier": "a"}}, []labels.Set{{"app": "web", "tier": "c"}, {"app": "web"}}},
		{"env!=prod", policyhubv1.ClusterSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"prod"}}}},
			[]labels.Set{{"env": "dev"}, {}}, []labels.Set{{"env": "prod"}}},
		{"gpu, !spot, zone notin (z1)", policyhubv1.ClusterSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "gpu", Operator: metav1.LabelSelectorOpExists},
			{Key: "spot", Operator: metav1.LabelSelectorOpDoesNotExist},
			{Key: "zone", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"z1"}},
		}}, []labels.Set{{"gpu": "a100"}, {"gpu": "", "zone": "z2"}}, []labels.Set{{"gpu": "x", "spot": "true"}, {"gpu": "x", "zone": "z1"}, {}}},
		{"app=web,app=web", policyhubv1.ClusterSelector{MatchLabels: map[string]string{"app": "web"}}, nil, nil},
	} {
		got, err := parseSelector("selector", tc.in)
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if diff := cmp.Diff(tc.want, *got); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tc.in, diff)
		}
		sel, err := metav1.LabelSelectorAsSelector(got.LabelSelector())
		if err != nil {
			t.Fatalf("%q: %v", tc.in, err)
		}
		for _, l := range tc.matches {
			if !sel.Matches(l) {
				t.Errorf("%q does not select %v", tc.in, l)
			}
		}
		for _, l := range tc.misses {
			if sel.Matches(l) {
				t.Errorf("%q selects %v", tc.in, l)
			}
		}
	}
	for _, in := range []string{"", " ", "app in (", "n>1", "n<1", "app=a,app=b", "Bad Key=x"} {
		var ue usageError
		if _, err := parseSelector("cluster-selector", in); !errors.As(err, &ue) || !strings.Contains(err.Error(), "--cluster-selector") {
			t.Errorf("%q: %v, want a usage error naming --cluster-selector", in, err)
		}
	}
}

func TestRelativeTime(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{3*24*time.Hour + 4*time.Hour, "in 3d4h"},
		{89 * 24 * time.Hour, "in 89d"},
		{5 * time.Hour, "in 5h"},
		{90 * time.Second, "in 90s"},
		{0, "in 0s"},
		{-5 * time.Hour, "5h ago"},
		{-30 * time.Minute, "30m ago"},
		{-10 * 24 * time.Hour, "10d ago"},
	} {
		if got := relativeTime(exceptionNow.Add(tc.d), exceptionNow); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.d, got, tc.want)
		}
	}
}

// listedExceptions are exceptions in several states and namespaces, unsorted.
func listedExceptions() []policyhubv1.FleetPolicyException {
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(exceptionNow.Add(d)) }
	return []policyhubv1.FleetPolicyException{
		{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-latest", Generation: 2,
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
			Spec: policyhubv1.FleetPolicyExceptionSpec{Target: policyhubv1.ExceptionTarget{Kind: kindFleetPolicy, Name: "disallow-latest-tag"},
				Owner: "team-shop", Ticket: "SHOP-1", ExpiresAt: at(76 * time.Hour), RequestedBy: "bob"},
			Status: policyhubv1.FleetPolicyExceptionStatus{State: policyhubv1.ExceptionActive, Policy: "ClusterPolicy/disallow-latest-tag", InForce: 2, Exempted: 7,
				Approval: &policyhubv1.ExceptionApproval{Decision: policyhubv1.DecisionApproved, By: "alice", Generation: 2}},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Namespace: "batch", Name: "gpu", Generation: 3},
			Spec: policyhubv1.FleetPolicyExceptionSpec{Target: policyhubv1.ExceptionTarget{Kind: kindPolicySet, Name: "pss",
				Member: &policyhubv1.MemberRef{Kind: "ClusterPolicy", Name: "disallow-privileged"}},
				Owner: "team-batch", Ticket: "OPS-42", ExpiresAt: at(-5 * time.Hour), RequestedBy: "carol"},
			// Approved for an older spec: not approved.
			Status: policyhubv1.FleetPolicyExceptionStatus{State: policyhubv1.ExceptionExpired,
				Approval: &policyhubv1.ExceptionApproval{Decision: policyhubv1.DecisionApproved, By: "alice", Generation: 2}},
		},
		{
			// Not seen by the hub yet.
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "api-root", Generation: 1},
			Spec: policyhubv1.FleetPolicyExceptionSpec{Target: policyhubv1.ExceptionTarget{Kind: kindFleetPolicy, Name: "no-root"},
				Owner: "team-shop", Ticket: "SHOP-2", ExpiresAt: at(30 * time.Minute), RequestedBy: "bob"},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "denied", Generation: 1},
			Spec: policyhubv1.FleetPolicyExceptionSpec{Target: policyhubv1.ExceptionTarget{Kind: kindFleetPolicy, Name: "no-root"},
				Owner: "team-shop", Ticket: "SHOP-3", ExpiresAt: at(48 * time.Hour), RequestedBy: "bob"},
			Status: policyhubv1.FleetPolicyExceptionStatus{State: policyhubv1.ExceptionDenied, Policy: "ClusterPolicy/no-root",
				Approval: &policyhubv1.ExceptionApproval{Decision: policyhubv1.DecisionDenied, By: "alice", Generation: 1}},
		},
		{
			// Approved, but refused as its spec stands: in force nowhere, and the list says why.
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "everywhere", Generation: 1},
			Spec: policyhubv1.FleetPolicyExceptionSpec{Target: policyhubv1.ExceptionTarget{Kind: kindFleetPolicy, Name: "no-root"},
				Owner: "team-shop", Ticket: "SHOP-4", ExpiresAt: at(48 * time.Hour), RequestedBy: "bob"},
			Status: policyhubv1.FleetPolicyExceptionStatus{State: policyhubv1.ExceptionInvalid,
				Approval: &policyhubv1.ExceptionApproval{Decision: policyhubv1.DecisionApproved, By: "alice", Generation: 1},
				Conditions: []metav1.Condition{{Type: policyhubv1.ConditionReady, Status: metav1.ConditionFalse, Reason: "InvalidException", ObservedGeneration: 1,
					Message: `spec.resources.namespaces: "*" has a wildcard; a tenant's exception names the namespaces granted to it: in force nowhere`}}},
		},
	}
}

func TestExceptionRowsAndTable(t *testing.T) {
	rows := exceptionRows(listedExceptions(), exceptionNow)
	var names []string
	for _, r := range rows {
		names = append(names, r.Namespace+"/"+r.Name)
	}
	if want := []string{"batch/gpu", "shop/api-root", "shop/denied", "shop/everywhere", "shop/web-latest"}; !cmp.Equal(names, want) {
		t.Fatalf("order %v, want %v", names, want)
	}
	if rows[0].Policy != "pset/pss:ClusterPolicy/disallow-privileged" || rows[0].ApprovedBy != "" || rows[1].Policy != "fp/no-root" {
		t.Errorf("rows %+v", rows)
	}

	var out bytes.Buffer
	tw := newTableWriter(&out)
	printExceptionTable(tw, rows, true)
	_ = tw.Flush()
	// POLICY names every target one way, as --policy does, whatever the hub resolved it to.
	want := `NAMESPACE   NAME         GENERATION   POLICY                                       STATE     EXPIRES                          IN-FORCE   EXEMPTED   OWNER        TICKET   REQUESTED-BY   APPROVED-BY
batch       gpu          3            pset/pss:ClusterPolicy/disallow-privileged   Expired   2030-01-01T07:00:00Z (5h ago)    0          0          team-batch   OPS-42   carol          -
shop        api-root     1            fp/no-root                                   -         2030-01-01T12:30:00Z (in 30m)    0          0          team-shop    SHOP-2   bob            -
shop        denied       1            fp/no-root                                   Denied    2030-01-03T12:00:00Z (in 2d)     0          0          team-shop    SHOP-3   bob            -
shop        everywhere   1            fp/no-root                                   Invalid   2030-01-03T12:00:00Z (in 2d)     0          0          team-shop    SHOP-4   bob            alice
shop        web-latest   2            fp/disallow-latest-tag                       Active    2030-01-04T16:00:00Z (in 3d4h)   2          7          team-shop    SHOP-1   bob            alice
exception shop/everywhere is Invalid, in force in 0 clusters: InvalidException: spec.resources.namespaces: "*" has a wildcard; a tenant's exception names the namespaces granted to it: in force nowhere
`
	if out.String() != want {
		t.Errorf("table:\n%s\nwant\n%s", out.String(), want)
	}

	// Within one namespace: no NAMESPACE column.
	out.Reset()
	tw = newTableWriter(&out)
	printExceptionTable(tw, rows[4:], false)
	_ = tw.Flush()
	if want := "NAME         GENERATION   POLICY                   STATE    EXPIRES                          IN-FORCE   EXEMPTED   OWNER       TICKET   REQUESTED-BY   APPROVED-BY\n" +
		"web-latest   2            fp/disallow-latest-tag   Active   2030-01-04T16:00:00Z (in 3d4h)   2          7          team-shop   SHOP-1   bob            alice\n"; out.String() != want {
		t.Errorf("table:\n%s\nwant\n%s", out.String(), want)
	}

	out.Reset()
	printExceptionTable(&out, nil, true)
	if out.Len() != 0 {
		t.Errorf("no rows: %q", out.String())
	}
}

// -o json|yaml: a FleetPolicyExceptionList, sorted, with kinds and without managedFields.
func TestExceptionListReport(t *testing.T) {
	var out bytes.Buffer
	if err := writeReport(&out, "json", exceptionListReport(&policyhubv1.FleetPolicyExceptionList{Items: listedExceptions()}), nil); err != nil {
		t.Fatal(err)
	}
	var got struct {
		APIVersion, Kind string
		Items            []map[string]any
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.APIVersion != "policyhub.io/v1alpha1" || got.Kind != "FleetPolicyExceptionList" || len(got.Items) != len(listedExceptions()) {
		t.Fatalf("%s", out.String())
	}
	first := got.Items[0]
	if first["kind"] != "FleetPolicyException" || first["metadata"].(map[string]any)["name"] != "gpu" || strings.Contains(out.String(), "managedFields") {
		t.Errorf("%s", out.String())
	}
	out.Reset()
	if err := writeReport(&out, "yaml", exceptionListReport(&policyhubv1.FleetPolicyExceptionList{}), nil); err != nil {
		t.Fatal(err)
	}
	if want := "apiVersion: policyhub.io/v1alpha1\nitems: []\nkind: FleetPolicyExceptionList\nmetadata: {}\n"; out.String() != want {
		t.Errorf("empty list:\n%s\nwant\n%s", out.String(), want)
	}
}

// What request prints of the created exception: the requester, and the generation to approve;
// -o yaml prints the object with its kind, without managedFields.
func TestRequestedLineAndPrintable(t *testing.T) {
	r := validRequest()
	created, err := r.build("shop", "web-latest", exceptionNow)
	if err != nil {
		t.Fatal(err)
	}
	created.Spec.RequestedBy, created.Generation = "bob", 1
	if want := "fleetpolicyexception shop/web-latest requested by bob (generation 1); it is inert until an approver reviews it and runs: kubectl policyhub exception approve web-latest -n shop --generation 1"; requestedLine(created) != want {
		t.Errorf("line %q\nwant %q", requestedLine(created), want)
	}
	created.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	var out bytes.Buffer
	if err := writeReport(&out, "yaml", printable(created), nil); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.HasPrefix(s, "apiVersion: policyhub.io/v1alpha1\nkind: FleetPolicyException\n") || strings.Contains(s, "managedFields") || created.ManagedFields == nil {
		t.Errorf("yaml:\n%s", s)
	}
}

// The commands' mistakes are usage errors, found before the hub is asked.
func TestExceptionUsage(t *testing.T) {
	for _, args := range [][]string{
		{"exception", "bogus"},
		{"exception", "request"},
		{"exception", "request", "a", "b"},
		{"exception", "request", "x", "--owner", "me"},
		{"exception", "request", "x", "--policy", "ap/x"},
		{"exception", "approve"},
		// What an approver approves is the spec they reviewed: they name its generation.
		{"exception", "approve", "x"},
		{"exception", "approve", "x", "--generation", "0"},
		{"exception", "deny", "x", "--generation", "-1"},
		{"exception", "deny", "a", "b"},
		{"exception", "revoke", "x", "--comment", strings.Repeat("c", maxCommentLength+1)},
		{"exception", "list", "x"},
		{"exception", "list", "-o", "xml"},
	} {
		var out, errOut bytes.Buffer
		code := Run(t.Context(), append([]string{"--kubeconfig", "/nonexistent"}, args...), Streams{Out: &out, ErrOut: &errOut})
		if code != ExitError || out.Len() != 0 || !strings.Contains(errOut.String(), "(see --help)") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out.String(), errOut.String())
		}
	}
	for _, sub := range []string{"request", "approve", "deny", "revoke", "list"} {
		var out bytes.Buffer
		code := Run(t.Context(), []string{"exception", sub, "--help"}, Streams{Out: &out, ErrOut: &out})
		if code != ExitOK || !strings.Contains(out.String(), "Examples:\n  ") || !strings.Contains(out.String(), "-o json|yaml prints ") {
			t.Errorf("exception %s --help: exit %d\n%s", sub, code, out.String())
		}
	}
}
