package main

func serve() { rules = rules.Without(flagLegacy) }
