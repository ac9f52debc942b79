"""Results written for other tools: a step as a Chrome/Kineto trace JSON with tpscope's tracks."""
