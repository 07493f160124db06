package broker

func configure(options Options) Rules { return options.Rules.Without(options.Legacy) }
