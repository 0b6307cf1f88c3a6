package match

import "math"

// WithFactors returns an index sharing ix's data that uses offCore and
// onlyAction in place of offCoreFactor and onlyActionFactor, for checking
// those constants against an evaluation set.
func (ix *Index) WithFactors(offCore, onlyAction float64) *Index {
	c := *ix
	c.offCore, c.onlyAction = offCore, onlyAction
	return &c
}

// The fit factors, for tests in package match_test.
const (
	OffCoreFactor    = offCoreFactor
	OnlyActionFactor = onlyActionFactor
)

// WithMargin returns an index sharing ix's data that uses margin in place
// of standoutMargin; a negative margin turns the stand-out rule off.
func (ix *Index) WithMargin(margin float64) *Index {
	c := *ix
	c.margin = margin
	return &c
}

// StandoutMargin is standoutMargin, for tests in package match_test.
const StandoutMargin = standoutMargin

// WithOffAction returns an index that shares ix's data with offActionFactor
// replaced (1: the action check off).
func (ix *Index) WithOffAction(f float64) *Index {
	c := *ix
	c.offAction = f
	return &c
}

// WithoutActionCheck returns an index that shares ix's data with the
// action check off: offActionFactor 1 and no family placement
// (familyRatio).
func (ix *Index) WithoutActionCheck() *Index {
	c := *ix
	c.offAction, c.famRatio = 1, math.Inf(1)
	return &c
}
