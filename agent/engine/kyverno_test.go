package engine

import (
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

func TestImageVersion(t *testing.T) {
	for _, tt := range []struct{ image, version, why string }{
		{"reg.kyverno.io/kyverno/kyverno:v1.19.1", "v1.19.1", ""},
		{"ghcr.io/kyverno/kyverno:v1.16.3", "v1.16.3", ""},
		{"kyverno:1.20.0-rc.1", "1.20.0-rc.1", ""},
		{"registry.local:5000/kyverno/kyverno:v1.19.1@sha256:" + strings.Repeat("a", 64), "v1.19.1", ""},
		{"registry.local:5000/kyverno/kyverno@sha256:" + strings.Repeat("a", 64), "", "pinned by digest only, no tag"},
		{"registry.local:5000/kyverno/kyverno", "", "no tag"},
		{"kyverno", "", "no tag"},
		{"ghcr.io/kyverno/kyverno:latest", "", `tag "latest" is not a version`},
		{"ghcr.io/kyverno/kyverno:main", "", `tag "main" is not a version`},
		{"ghcr.io/kyverno/kyverno:v1.19.1;rm", "", `tag "v1.19.1;rm" is not a version`},
		{"ghcr.io/kyverno/kyverno:v1." + strings.Repeat("9", 80), "", "is not a version"},
		{"", "", "no tag"},
	} {
		version, why := ImageVersion(tt.image)
		if version != tt.version || !strings.Contains(why, tt.why) || (tt.why == "") != (why == "") {
			t.Errorf("ImageVersion(%q) = %q, %q; want %q, %q", tt.image, version, why, tt.version, tt.why)
		}
		if len(why) > 100 {
			t.Errorf("ImageVersion(%q): why is %d bytes", tt.image, len(why))
		}
	}
}

func TestParseFlags(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		want map[string]string
	}{
		{"the chart's form", []string{"--caSecretName=x", "--enablePolicyException=true", "--exceptionNamespace=policyhub-system"},
			map[string]string{"enablePolicyException": "true", "exceptionNamespace": "policyhub-system"}},
		{"one dash, value apart", []string{"-exceptionNamespace", "kyverno", "-enablePolicyException"},
			map[string]string{"enablePolicyException": "true", "exceptionNamespace": "kyverno"}},
		{"a boolean does not take the next argument", []string{"--enablePolicyException", "--exceptionNamespace=ns"},
			map[string]string{"enablePolicyException": "true", "exceptionNamespace": "ns"}},
		{"the last wins", []string{"--enablePolicyException=true", "--enablePolicyException=false"},
			map[string]string{"enablePolicyException": "false"}},
		{"-- ends the flags", []string{"--", "--enablePolicyException=true"}, map[string]string{}},
		{"a string flag without its value", []string{"--exceptionNamespace"}, map[string]string{}},
		{"other flags are skipped", []string{"--allowedResults=fail", "x", "--enablePolicyExceptionX=true"},
			map[string]string{"allowedResults": "fail"}},
		{"an empty value is a value", []string{"--allowedResults="}, map[string]string{"allowedResults": ""}},
	} {
		if got := ParseFlags(tt.args, readFlags); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: ParseFlags(%q) = %v, want %v", tt.name, tt.args, got, tt.want)
		}
	}
	long := ParseFlags([]string{"--exceptionNamespace=" + strings.Repeat("n", 10000)}, readFlags)
	if len(long["exceptionNamespace"]) > maxKept {
		t.Errorf("a flag value of 10000 bytes kept as %d bytes", len(long["exceptionNamespace"]))
	}
}

func TestReportedResults(t *testing.T) {
	for _, tt := range []struct {
		value string
		given bool
		want  []string
	}{
		{"", false, nil},
		{"pass,fail,error,warn,skip", true, nil},
		{"fail,error", true, []string{"fail", "error"}},
		{"error,fail,fail", true, []string{"fail", "error"}},
		{"FAIL, warn,skip", true, []string{"skip"}}, // Kyverno takes the exact words only
	} {
		if got := ReportedResults(tt.value, tt.given); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ReportedResults(%q, %v) = %v, want %v", tt.value, tt.given, got, tt.want)
		}
	}
}

func kyvernoDeployment(component, container, image string, args ...string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kyverno", Name: "kyverno-" + component, Labels: map[string]string{LabelComponent: component}},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "sidecar", Image: "busybox:1.36"},
			{Name: container, Image: image, Args: args},
		}}}},
	}
}

func TestFacts(t *testing.T) {
	yes, no := true, false
	for _, tt := range []struct {
		name               string
		admission, reports *appsv1.Deployment
		want               *policyhubv1.KyvernoFacts
	}{
		{"no admission controller", nil, kyvernoDeployment(ComponentReports, "controller", "k:v1.19.1"), nil},
		{"the chart's", kyvernoDeployment(ComponentAdmission, "kyverno", "reg.kyverno.io/kyverno/kyverno:v1.19.1", "--enablePolicyException=true", "--exceptionNamespace=policyhub-system"),
			kyvernoDeployment(ComponentReports, "controller", "reg.kyverno.io/kyverno/reports-controller:v1.19.1", "--allowedResults=fail,error"),
			&policyhubv1.KyvernoFacts{Version: "v1.19.1", VersionSource: "image tag of Deployment kyverno/kyverno-admission-controller",
				PolicyExceptions: &yes, ExceptionNamespace: "policyhub-system", ReportedResults: []string{"fail", "error"}}},
		{"flags absent: Kyverno's defaults", kyvernoDeployment(ComponentAdmission, "kyverno", "k:v1.16.3"), nil,
			&policyhubv1.KyvernoFacts{Version: "v1.16.3", VersionSource: "image tag of Deployment kyverno/kyverno-admission-controller", PolicyExceptions: &no}},
		{"a digest only", kyvernoDeployment(ComponentAdmission, "kyverno", "k@sha256:"+strings.Repeat("0", 64), "--enablePolicyException=maybe"), nil,
			&policyhubv1.KyvernoFacts{VersionSource: "image tag of Deployment kyverno/kyverno-admission-controller: pinned by digest only, no tag"}},
		{"an overlong exception namespace is not taken", kyvernoDeployment(ComponentAdmission, "kyverno", "k:latest", "--exceptionNamespace="+strings.Repeat("n", 64)), nil,
			&policyhubv1.KyvernoFacts{VersionSource: `image tag of Deployment kyverno/kyverno-admission-controller: tag "latest" is not a version`, PolicyExceptions: &no}},
	} {
		var admission, reports *Deployment
		if tt.admission != nil {
			d, ok := FromDeployment(tt.admission)
			if !ok {
				t.Fatalf("%s: the admission controller's Deployment not taken", tt.name)
			}
			admission = &d
		}
		if tt.reports != nil {
			d, ok := FromDeployment(tt.reports)
			if !ok {
				t.Fatalf("%s: the reports controller's Deployment not taken", tt.name)
			}
			reports = &d
		}
		if got := Facts(admission, reports); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: Facts = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

func TestFromDeployment(t *testing.T) {
	other := kyvernoDeployment("cleanup-controller", "controller", "k:v1.19.1")
	if _, ok := FromDeployment(other); ok {
		t.Error("the cleanup controller's Deployment taken for the admission or reports controller")
	}
	noContainer := kyvernoDeployment(ComponentAdmission, "renamed", "k:v1.19.1")
	if _, ok := FromDeployment(noContainer); ok {
		t.Error("a Deployment of two containers, none named kyverno, taken")
	}
	one := kyvernoDeployment(ComponentAdmission, "renamed", "k:v1.19.1")
	one.Spec.Template.Spec.Containers = one.Spec.Template.Spec.Containers[1:]
	one.Spec.Template.Spec.Containers[0].Command = []string{"/kyverno", "--enablePolicyException"}
	d, ok := FromDeployment(one)
	if !ok || d.Image != "k:v1.19.1" || d.Flags["enablePolicyException"] != "true" {
		t.Errorf("a one-container Deployment with its flags in command: %+v, %v", d, ok)
	}
}

func TestPolicyAPIs(t *testing.T) {
	groups := &metav1.APIGroupList{Groups: []metav1.APIGroup{
		{Name: "policies.kyverno.io", Versions: []metav1.GroupVersionForDiscovery{{GroupVersion: "policies.kyverno.io/v1beta1"}, {GroupVersion: "policies.kyverno.io/v1"}}},
		{Name: "apps", Versions: []metav1.GroupVersionForDiscovery{{GroupVersion: "apps/v1"}}},
		{Name: "kyverno.io", Versions: []metav1.GroupVersionForDiscovery{{GroupVersion: "kyverno.io/v2"}, {GroupVersion: "kyverno.io/v1"}, {GroupVersion: "kyverno.io/v1"}}},
	}}
	want := []string{"kyverno.io/v1", "kyverno.io/v2", "policies.kyverno.io/v1", "policies.kyverno.io/v1beta1"}
	if got := PolicyAPIs(groups); !reflect.DeepEqual(got, want) {
		t.Errorf("PolicyAPIs = %v, want %v", got, want)
	}
	many := &metav1.APIGroupList{Groups: []metav1.APIGroup{{Name: "kyverno.io"}}}
	for i := range 100 {
		many.Groups[0].Versions = append(many.Groups[0].Versions, metav1.GroupVersionForDiscovery{GroupVersion: "kyverno.io/v" + strings.Repeat("1", i+1)})
	}
	many.Groups[0].Versions = append(many.Groups[0].Versions, metav1.GroupVersionForDiscovery{GroupVersion: "kyverno.io/" + strings.Repeat("x", 200)})
	got := PolicyAPIs(many)
	if len(got) != policyhubv1.MaxSummaryPolicyAPIs {
		t.Errorf("%d APIs kept of 101, want %d", len(got), policyhubv1.MaxSummaryPolicyAPIs)
	}
	for _, api := range got {
		if len(api) > policyhubv1.MaxSummaryPolicyAPILength {
			t.Errorf("an API of %d bytes kept", len(api))
		}
	}
}
