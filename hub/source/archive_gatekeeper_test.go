package source

import (
	"context"
	"fmt"
	"net/http"
	"testing"
)

// A Gatekeeper library (a template beside its Constraints) is read as one: templates and
// Constraints taken, a mutation left out and counted.
func TestFetchArchiveTakesGatekeeperTemplatesAndConstraints(t *testing.T) {
	url, digest := serve(t, tarball(t,
		file{name: "library/requiredlabels/template.yaml", content: "apiVersion: templates.gatekeeper.sh/v1\nkind: ConstraintTemplate\nmetadata: {name: k8srequiredlabels}\nspec: {crd: {spec: {names: {kind: K8sRequiredLabels}}}}\n"},
		file{name: "library/requiredlabels/samples/constraint.yaml", content: "apiVersion: constraints.gatekeeper.sh/v1beta1\nkind: K8sRequiredLabels\nmetadata: {name: must-have-team}\nspec: {}\n---\napiVersion: mutations.gatekeeper.sh/v1\nkind: Assign\nmetadata: {name: never}\nspec: {}\n"},
	))
	art, err := FetchArchive(context.Background(), http.DefaultClient, url, digest, "library", DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range art.Policies {
		got = append(got, identity(p))
	}
	if want := "[ConstraintTemplate k8srequiredlabels K8sRequiredLabels must-have-team]"; fmt.Sprint(got) != want || art.Skipped != 1 {
		t.Errorf("policies %v, skipped %d; want %s and the mutation skipped", got, art.Skipped, want)
	}
}
