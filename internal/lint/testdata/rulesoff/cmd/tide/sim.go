package main

func sim() { rules = rules.Without(flagLegacy) }
