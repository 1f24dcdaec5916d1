// Package model predicts the goodput of one TCP flow striped over several heterogeneous
// paths: Paper is seed 002's analytical model of TCP striped round robin over n links
// (eqs. 1-24, eq. 9 corrected), the baseline; Predict is Plait's predictor for one Linux
// cubic or BBR flow under rr, wrr or edpf (window limits, drop-tail queues, loss, RACK's
// reordering window, the course of a finite transfer: steps P1-P10); BestSubset searches
// it for the path set the controller uses. The equations and assumptions are in
// docs/model.md, the validation series against the lab in docs/results/model.md.
package model
