package dryruns

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPodURLs(t *testing.T) {
	pod := func(name, ip string, phase corev1.PodPhase, ports ...corev1.ContainerPort) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "kyverno", Ports: ports}}},
			Status: corev1.PodStatus{Phase: phase, PodIP: ip}}
	}
	deleting := pod("kyverno-d", "10.0.0.9", corev1.PodRunning)
	deleting.DeletionTimestamp = &metav1.Time{}
	tests := []struct {
		name string
		pods []corev1.Pod
		want []string
	}{
		{"none", nil, nil},
		{"the chart's port by name, else 8000; by Pod name", []corev1.Pod{
			pod("kyverno-b", "10.0.0.2", corev1.PodRunning),
			pod("kyverno-a", "10.0.0.1", corev1.PodRunning, corev1.ContainerPort{Name: "https", ContainerPort: 9443}, corev1.ContainerPort{Name: "metrics-port", ContainerPort: 8001}),
		}, []string{"http://10.0.0.1:8001/metrics", "http://10.0.0.2:8000/metrics"}},
		{"IPv6 in brackets", []corev1.Pod{pod("kyverno-a", "fd00::1", corev1.PodRunning)}, []string{"http://[fd00::1]:8000/metrics"}},
		{"not running, terminating, without an IP or with a hostile one: skipped", []corev1.Pod{
			pod("kyverno-p", "10.0.0.3", corev1.PodPending), deleting, pod("kyverno-n", "", corev1.PodRunning),
			pod("kyverno-h", "evil.example.com/x?", corev1.PodRunning), pod("kyverno-z", "fe80::1%eth0", corev1.PodRunning),
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PodURLs(tt.pods); fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
	var many []corev1.Pod
	for i := range MaxEndpoints + 5 {
		many = append(many, pod(fmt.Sprintf("kyverno-%02d", i), fmt.Sprintf("10.0.1.%d", i), corev1.PodRunning))
	}
	if got := PodURLs(many); len(got) != MaxEndpoints {
		t.Errorf("%d URLs, want at most %d", len(got), MaxEndpoints)
	}
}
