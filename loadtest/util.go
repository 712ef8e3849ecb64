package main

import "sort"

func sortStrings(s []string) []string { sort.Strings(s); return s }

func f64(v float64) *float64 { return &v }
