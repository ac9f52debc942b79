// The trace types tpscope's dashboard draws: go.Scatter (in plotly.js's core), go.Scattergl
// (the Timeline's classes from figures/timeline.py's WEBGL_FROM segments on) and go.Bar.
'use strict';

var Plotly = require('plotly.js/lib/core');

Plotly.register([require('plotly.js/lib/scattergl'), require('plotly.js/lib/bar')]);

module.exports = Plotly;
