package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/render"
)

// Where a FleetPolicy's candidate is.
const (
	candidatePreviewTemplate = "spec.preview.template"
	candidateHeldBack        = "spec.template (held back: only its shadow ships until the preview ends)"
	candidateRolloutGate     = "spec.template (spec.rollout.previewGate: before its waves start)"
)

// previewTarget is the preview a FleetPolicy asks for: its candidate's revision and where the
// candidate is, at the FleetPolicy's generation.
type previewTarget struct {
	fleetPolicy string
	revision    string
	candidate   string
	generation  int64
}

// previewTargetOf is the preview fp runs, as the hub decides it (controllers.previewCandidate):
// spec.preview's template, else spec.template when spec.preview is set (held back); else, when
// the rollout's preview gate previews a new version (status.preview is set), spec.template. An
// error says no preview runs.
func previewTargetOf(fp *policyhubv1.FleetPolicy) (previewTarget, error) {
	t := previewTarget{fleetPolicy: fp.Name, generation: fp.Generation}
	tmpl := &fp.Spec.Template
	switch {
	case fp.Spec.Preview != nil && fp.Spec.Preview.Template != nil:
		tmpl, t.candidate = fp.Spec.Preview.Template, candidatePreviewTemplate
	case fp.Spec.Preview != nil:
		t.candidate = candidateHeldBack
	case fp.Spec.Rollout != nil && fp.Spec.Rollout.PreviewGate != nil && fp.Status.Preview != nil:
		t.candidate = candidateRolloutGate
	case fp.Spec.Rollout != nil && fp.Spec.Rollout.PreviewGate != nil:
		return t, fmt.Errorf("FleetPolicy %s has no preview running: its rollout previews each new version of spec.template before its waves start (spec.rollout.previewGate), and no wave is waiting for one", fp.Name)
	default:
		return t, fmt.Errorf("FleetPolicy %s has no preview running: start one with `kubectl policyhub preview %s -f CANDIDATE`", fp.Name, fp.Name)
	}
	rev, err := render.TemplateRevision(*tmpl)
	if err != nil {
		return t, fmt.Errorf("FleetPolicy %s: %s: %w", fp.Name, t.candidate, err)
	}
	t.revision = rev
	return t, nil
}

// previewState is where a preview stands for a waiting command.
type previewState struct {
	// line says it in one line; the command prints it when it changes.
	line string
	done bool
	// movedOn: the rollout's preview completed within its gate and the waves started, so
	// the hub no longer shows it (status.preview is gone).
	movedOn bool
	// err: it will not complete (the candidate changed, the hub cannot run it).
	err error
}

// previewProgress is where the preview target asks for stands in fp, as read now.
func previewProgress(fp *policyhubv1.FleetPolicy, target previewTarget) previewState {
	if rolloutMovedOn(fp, target) {
		return previewState{movedOn: true, line: fmt.Sprintf("FleetPolicy %s: the preview of revision %s passed spec.rollout.previewGate and the rollout started its waves (kubectl policyhub rollout status %s)", fp.Name, target.revision, fp.Name)}
	}
	now, err := previewTargetOf(fp)
	switch {
	case err != nil:
		return previewState{err: fmt.Errorf("the preview of FleetPolicy %s ended meanwhile (spec.preview removed, or its rollout moved on)", fp.Name)}
	case now.revision != target.revision:
		return previewState{err: fmt.Errorf("the candidate of FleetPolicy %s was replaced meanwhile: %s is now revision %s, not %s", fp.Name, now.candidate, now.revision, target.revision)}
	case fp.Status.ObservedGeneration < target.generation:
		return previewState{line: fmt.Sprintf("FleetPolicy %s: waiting for the hub to process generation %d (it has processed %d)", fp.Name, target.generation, fp.Status.ObservedGeneration)}
	}
	if s := meta.FindStatusCondition(fp.Status.Conditions, policyhubv1.ConditionStalled); s != nil && s.Status == metav1.ConditionTrue && s.ObservedGeneration >= target.generation {
		return previewState{err: fmt.Errorf("the hub cannot run the preview of FleetPolicy %s: %s: %s", fp.Name, s.Reason, s.Message)}
	}
	p := fp.Status.Preview
	if p == nil || p.Revision != target.revision {
		return previewState{line: fmt.Sprintf("FleetPolicy %s: waiting for the hub to start the preview of revision %s", fp.Name, target.revision)}
	}
	return previewState{line: fmt.Sprintf("FleetPolicy %s: reported %d of %d clusters", fp.Name, p.Reported, p.Clusters), done: p.CompletedAt != nil}
}

// rolloutMovedOn says whether the rollout's preview of target has ended because it passed the
// gate: the hub shows a rollout's preview only until the waves it holds start, so a complete preview
// may be gone before a poll sees it.
func rolloutMovedOn(fp *policyhubv1.FleetPolicy, target previewTarget) bool {
	if target.candidate != candidateRolloutGate || fp.Spec.Preview != nil || fp.Status.Preview != nil ||
		fp.Spec.Rollout == nil || fp.Spec.Rollout.PreviewGate == nil || fp.Status.Rollout == nil || fp.Status.Rollout.Revision != target.revision {
		return false
	}
	rev, err := render.TemplateRevision(fp.Spec.Template)
	return err == nil && rev == target.revision
}

// waitComplete polls FleetPolicy name until the preview target asks for is complete, printing a
// progress line to standard error whenever it changes. It returns the FleetPolicy as last read
// (nil when never read) and, on a timeout, an error saying how far the preview got.
func (po *previewOptions) waitComplete(ctx context.Context, c client.Reader, name string, target previewTarget) (*policyhubv1.FleetPolicy, error) {
	waitCtx, cancel := context.WithTimeout(ctx, po.timeout)
	defer cancel()
	var last *policyhubv1.FleetPolicy
	shown := ""
	for {
		fp, err := getFleetPolicy(waitCtx, c, name)
		switch {
		case err != nil && ctx.Err() == nil && waitCtx.Err() != nil:
			return last, previewTimeout(last, target, po.timeout)
		case err != nil:
			return nil, err
		}
		last = fp
		state := previewProgress(fp, target)
		if state.line != "" && state.line != shown {
			fmt.Fprintln(po.streams.ErrOut, state.line)
			shown = state.line
		}
		switch {
		case state.movedOn:
			return fp, errMovedOn
		case state.err != nil || state.done:
			return fp, state.err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-waitCtx.Done():
			return fp, previewTimeout(fp, target, po.timeout)
		case <-time.After(previewPoll):
		}
	}
}

// errMovedOn is waitComplete's error when the rollout's preview passed its gate and is gone.
var errMovedOn = errors.New("the rollout's preview passed its gate")

// previewTimeoutError is a wait that timed out.
type previewTimeoutError struct{ msg string }

func (e *previewTimeoutError) Error() string { return e.msg }

// previewTimeout is the error of a wait that timed out, saying how far the preview got.
func previewTimeout(fp *policyhubv1.FleetPolicy, target previewTarget, after time.Duration) error {
	prefix := fmt.Sprintf("timed out after %s waiting for the preview of FleetPolicy %s (revision %s)", after, target.fleetPolicy, target.revision)
	var why string
	switch {
	case fp == nil:
		why = "the FleetPolicy could not be read"
	case fp.Status.ObservedGeneration < target.generation:
		why = fmt.Sprintf("the hub has not processed generation %d yet (status.observedGeneration %d): is the hub running?", target.generation, fp.Status.ObservedGeneration)
	case fp.Status.Preview == nil || fp.Status.Preview.Revision != target.revision:
		why = "the hub has not started it yet"
	default:
		why = fmt.Sprintf("%d of %d clusters reported", fp.Status.Preview.Reported, fp.Status.Preview.Clusters)
	}
	return &previewTimeoutError{msg: prefix + ": " + why}
}
