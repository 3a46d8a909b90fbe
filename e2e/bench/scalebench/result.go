package main

import (
	"time"
)

// hubState is what a settled hub costs: its memory and goroutines (from its /metrics), the
// watches it holds open in the managed clusters (from theirs), and the CPU every part uses per
// second while nothing is asked of the hub.
type hubState struct {
	rss           float64 // bytes
	rssFrom       string  // "/metrics" or "/proc"
	goroutines    float64
	goroutinesOK  bool
	watches       float64 // WATCH requests open in the managed apiservers, less the baseline without a hub
	idleCores     map[string]float64
	gatewayRSS    float64
	hubAPIRSS     float64
	settled       bool
	settleTook    time.Duration
	settleResidue float64 // the hub's cores when it did not settle
}

// result is what one scenario measured.
type result struct {
	name, hubID, prefix string
	clusters            int
	clusterNames        []string
	fps                 []string
	start               time.Time

	converge  time.Duration
	converged bool
	missing   int
	phases    string
	cpu       map[string]float64 // CPU seconds while converging
	hubWrites map[string]float64 // mutating requests the hub's apiserver served while converging, by resource
	state     hubState

	statusSynced, statusResults []float64

	noop struct {
		ran        bool
		took       time.Duration
		settled    bool
		cpu        map[string]float64
		reconciles float64
		reconOK    bool
		requests   float64
		hubWrites  map[string]float64
	}
	agg struct {
		ran            bool
		latencies      []float64 // seconds, sorted
		notReached     int
		sendSpan       time.Duration // from the first write sent to the last sent
		writeSpan      time.Duration // from the first write sent to the last stored
		metricClusters int
		cpu            map[string]float64
		hubWrites      map[string]float64
		// the summary marked aggregated by the hub (its series then in /metrics)
		metricLatencies  []float64
		metricNotReached int
	}
	// quiet is the quiet fleet (quietFleet), once per -quiet-write: Lease renewals only.
	quiet []quietResult
	// busy is the busy fleet (busyFleet): every cluster's results changing.
	busy struct {
		ran                                   bool
		took                                  time.Duration
		rounds, failed, skipped               int
		cores                                 map[string]float64
		hubWrites                             map[string]float64
		statusBytesPerMin, summaryBytesPerMin float64
		latencies                             []float64 // seconds, sorted: from each summary written
		notReached                            int
		// changeLatencies: from each round that changed the watched count, written or not.
		changeLatencies  []float64
		changeNotReached int
		failShare        float64
		// paced (-busy-paced): the agents scheduled their pushes.
		paced                   bool
		pushes                  int64 // pushes in the window
		pushInterval, heartbeat time.Duration
		startTook, drainTook    time.Duration
		// lastLanded, lastMissing: clusters whose summary on the hub held their last round, or
		// not, after the drain.
		lastLanded, lastMissing int
	}
	// cli is `kubectl policyhub status NAME` of one FleetPolicy (cliStatus).
	cli struct {
		times         []float64 // seconds, sorted
		listed, bytes int
	}
	// floor is the status write floor (statusFloor), measured after the aggregation.
	floor struct {
		ran    bool
		rounds int
		round  time.Duration // the fastest round
		took   time.Duration
		cpu    map[string]float64
	}
	dark struct {
		blackHoled, refusing        int
		healthy                     time.Duration
		healthyOK                   bool
		baseline                    time.Duration
		baselineOK                  bool
		failed                      time.Duration
		failedOK                    bool
		failedMissing               int
		accepted                    int
		healthyMissing              int
		blackHoleMsgs, refusingMsgs []string
	}
	logLines, logErrors int
	logPath             string
	stopTook            time.Duration
	stopKilled          bool
}

// quietResult is one run of the quiet fleet.
type quietResult struct {
	write            string // how renewals were written (-quiet-write)
	heartbeat        time.Duration
	heartbeatFrom    string // "-quiet-heartbeat" or "published"
	took             time.Duration
	renewals, failed int
	cores            map[string]float64 // cores of each part over the window
	hubWrites        map[string]float64
}
