// Bundles entry.js as plotly.js's own dist bundles are built (its esbuild-config.js: the same
// plugins, aliases and target), minified, with plotly.js's license header on top. One change: a
// stylesheet is bundled empty, as the only one is maplibre-gl's, which only the map traces (not in
// this bundle) put on the page; plotly.js's own plugin names it by its absolute path on the
// machine that builds, which would make each build differ.
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import * as esbuild from 'esbuild';

const require = createRequire(import.meta.url);
const { environmentPlugin } = require('esbuild-plugin-environment');
const { glsl } = require('esbuild-plugin-glsl');

const emptyCss = {
    name: 'empty-css',
    setup(build) {
        build.onLoad({ filter: /\.css$/ }, () => ({ contents: '', loader: 'js' }));
    },
};
const out = process.argv[2];
const version = JSON.parse(readFileSync(require.resolve('plotly.js/package.json'))).version;
const result = await esbuild.build({
    entryPoints: ['entry.js'],
    format: 'iife',
    globalName: 'Plotly',
    bundle: true,
    minify: true,
    sourcemap: false,
    plugins: [emptyCss, glsl({ minify: true }), environmentPlugin({ NODE_DEBUG: false })],
    alias: { regl: '@plotly/regl', stream: 'stream-browserify' },
    define: { global: 'window', 'define.amd': 'false' },
    target: 'es2016',
    legalComments: 'eof',
    write: false,
    logLevel: 'warning',
});
const header = `/**
* plotly.js (scatter, scattergl, bar - minified) v${version}
* Copyright 2012-2026, Plotly, Inc.
* All rights reserved.
* Licensed under the MIT license
*/
`;
writeFileSync(out, header + result.outputFiles[0].text + 'window.Plotly = Plotly;\n');
