package sim

func run() { rules = rules.Without(legacy) }
