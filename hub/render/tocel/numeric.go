package tocel

import "fmt"

// Comparisons (>, >=, <, <=) with an integer bound N, as Kyverno's pattern package decides them
// (pkg/engine/pattern validateString): the value is first tried as a duration (only when the
// bound is one too, which for an integer means 0), then as a quantity, and otherwise fails;
// a missing or null value reads as 0, a bool fails.
//
//   - int: compared exactly (its decimal text is the same quantity);
//   - string: a Go duration when N is 0 (duration(x) against 0s), else a quantity
//     (isQuantity/quantity from the Kubernetes CEL library, which Kyverno's environment has);
//   - double: compared as a number. Kyverno compares its "%f" text (6 decimals), so a number
//     within 0.0000005 of N may differ; the rule's report says so.

// durationText matches what Go's time.ParseDuration accepts (overflow aside).
const durationText = `^[-+]?(0|(([0-9]+(\\.[0-9]*)?|\\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$`

// compareCEL is the CEL comparing x of type typ with the bound.
func compareCEL(x, typ, op string, n int64) string {
	switch typ {
	case "int":
		return fmt.Sprintf("%s %s %d", x, op, n)
	case "double":
		return fmt.Sprintf("%s %s %d.0", x, op, n)
	}
	qty := fmt.Sprintf("(isQuantity(%s) && quantity(%s).compareTo(quantity('%d')) %s 0)", x, x, n, op)
	if n != 0 {
		return qty
	}
	return fmt.Sprintf("(%s.matches('%s') ? duration(%s) %s duration('0s') : %s)", x, durationText, x, op, qty)
}

// compareInts is the comparison on Go integers (for values decided statically).
func compareInts(a int64, op string, b int64) bool {
	switch op {
	case ">":
		return a > b
	case ">=":
		return a >= b
	case "<":
		return a < b
	case "<=":
		return a <= b
	}
	return false
}
