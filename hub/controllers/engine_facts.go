package controllers

import (
	"sync"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// EngineFacts keeps, per cluster, the engine facts the hub's workers act on, from the cluster's
// accepted summary: the Kyverno version its agent reports (spec.engine.kyverno.version). One
// short string per cluster, dropped with the cluster's summary. A change is handed to Changed
// (the cluster's worker then syncs everything there again): what Kyverno enforces may have changed.
type EngineFacts struct {
	// Changed, when set, is told a cluster whose facts changed. It must not block.
	Changed func(cluster string)

	mu       sync.RWMutex
	versions map[string]string
}

// NewEngineFacts returns an empty record.
func NewEngineFacts() *EngineFacts {
	return &EngineFacts{versions: map[string]string{}}
}

// KyvernoVersion is the Kyverno version the cluster's agent last reported ("" when unknown).
func (e *EngineFacts) KyvernoVersion(cluster string) string {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.versions[cluster]
}

// Set takes the facts of the cluster's accepted summary.
func (e *EngineFacts) Set(cluster string, spec *policyhubv1.PolicyReportSummarySpec) {
	version := ""
	if spec.Engine.Kyverno != nil {
		version = spec.Engine.Kyverno.Version
	}
	e.update(cluster, version)
}

// Forget drops the cluster's facts (its summary is gone, refused, or another replica's).
func (e *EngineFacts) Forget(cluster string) {
	e.update(cluster, "")
}

func (e *EngineFacts) update(cluster, version string) {
	e.mu.Lock()
	old, had := e.versions[cluster]
	if version == "" {
		delete(e.versions, cluster)
	} else {
		e.versions[cluster] = version
	}
	e.mu.Unlock()
	if (had || version != "") && old != version && e.Changed != nil {
		e.Changed(cluster)
	}
}
