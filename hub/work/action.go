package work

// Action is what a pass does, or would do in a dry-run, to one object in a cluster.
type Action string

const (
	// ActionCreate makes an object the cluster does not have.
	ActionCreate Action = "Create"
	// ActionUpdate restores or changes an owned object whose content differs.
	ActionUpdate Action = "Update"
	// ActionUnchanged leaves an owned object that already holds the desired content.
	ActionUnchanged Action = "Unchanged"
	// ActionDelete prunes an owned object no declaration wants any more.
	ActionDelete Action = "Delete"
	// ActionConflict leaves an object policyhub may not write (not ours, or claimed by another declaration).
	ActionConflict Action = "Conflict"
	// ActionFailed is an action the cluster refused (reported in place of the planned one).
	ActionFailed Action = "Failed"
)

// writes reports whether the action sends a write to the cluster.
func (a Action) writes() bool {
	return a == ActionCreate || a == ActionUpdate || a == ActionDelete
}
