package main

import "strconv"

// optionalBool is a boolean flag that knows whether it was given: `-name`, `-name=true` or
// `-name=false`, and when absent the scenario chooses.
type optionalBool struct {
	value, set bool
}

func (o *optionalBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	o.value, o.set = v, true
	return nil
}

func (o *optionalBool) String() string {
	if o == nil || !o.set {
		return "auto"
	}
	return strconv.FormatBool(o.value)
}

// IsBoolFlag lets `-name` alone mean true.
func (o *optionalBool) IsBoolFlag() bool { return true }

// or is the flag's value when given, otherwise def.
func (o optionalBool) or(def bool) bool {
	if o.set {
		return o.value
	}
	return def
}
