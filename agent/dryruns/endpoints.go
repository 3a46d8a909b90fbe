package dryruns

import (
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Where Kyverno's admission controller Pods serve their metrics (its Helm chart's defaults).
const (
	// DefaultPort is the metrics port when the Pod names none.
	DefaultPort = 8000
	// portName is the name Kyverno's chart gives the metrics container port.
	portName = "metrics-port"
	// MetricsPath is Kyverno's metrics path.
	MetricsPath = "/metrics"
	// MaxEndpoints bounds the replicas read.
	MaxEndpoints = 16
)

// PodURLs chooses the metrics URLs of the admission controller's Pods: one per running,
// not-terminating Pod with an IP (each replica counts its own admissions), at its container
// port named metrics-port or else DefaultPort, in the order of the Pods' names, at most
// MaxEndpoints.
func PodURLs(pods []corev1.Pod) []string {
	pods = slices.Clone(pods)
	slices.SortFunc(pods, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	var urls []string
	for i := range pods {
		p := &pods[i]
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			continue
		}
		ip, err := netip.ParseAddr(p.Status.PodIP)
		if err != nil || ip.Zone() != "" {
			continue
		}
		u := "http://" + net.JoinHostPort(ip.String(), strconv.Itoa(metricsPort(p))) + MetricsPath
		if slices.Contains(urls, u) {
			continue
		}
		urls = append(urls, u)
		if len(urls) == MaxEndpoints {
			break
		}
	}
	return urls
}

func metricsPort(p *corev1.Pod) int {
	for _, c := range p.Spec.Containers {
		for _, port := range c.Ports {
			if port.Name == portName && port.ContainerPort > 0 && port.ContainerPort < 65536 {
				return int(port.ContainerPort)
			}
		}
	}
	return DefaultPort
}
