package rules

import "testing"

func TestZeroValueHasEveryRuleOn(t *testing.T) {
	var r Rules
	for _, rule := range All() {
		if !r.On(rule) {
			t.Errorf("%s is off in the zero value", rule)
		}
	}
	if !r.AllOn() || r.String() != "all rules on" {
		t.Errorf("zero value: AllOn %t, %q", r.AllOn(), r.String())
	}
}

func TestWithoutSwitchesOffOneRuleAndLeavesTheOriginal(t *testing.T) {
	var original Rules
	legacy := original.Without(EpochSafeISRJoin).Without(FencedFetch)
	if legacy.On(EpochSafeISRJoin) || legacy.On(FencedFetch) || !legacy.On(EpochTruncation) || legacy.AllOn() {
		t.Errorf("legacy rules: %s", legacy)
	}
	if !original.AllOn() {
		t.Error("Without changed the rules it was called on")
	}
	if legacy.String() != "legacy kafka-6880, kafka-7128" {
		t.Errorf("String() = %q", legacy.String())
	}
}

func TestParse(t *testing.T) {
	for _, rule := range All() {
		if parsed, err := Parse(string(rule)); err != nil || parsed != rule {
			t.Errorf("Parse(%q) = %q, %v", rule, parsed, err)
		}
	}
	if _, err := Parse("kafka-9999"); err == nil {
		t.Error("Parse accepted an unknown rule")
	}
}

func TestRevokeBeforeAssignSwitchesOff(t *testing.T) {
	var r Rules
	if !r.On(RevokeBeforeAssign) || r.Without(RevokeBeforeAssign).On(RevokeBeforeAssign) {
		t.Error("revoke-before-assign does not switch like the other rules")
	}
}
