// Bundles entry.js as plotly.js's own dist bundles are built (its esbuild-config.js: the same
// plugins, aliases and target), minified, with plotly.js's license header on top. Two changes:
// - a stylesheet is bundled empty, as the only one is maplibre-gl's, which only the map traces
//   (not in this bundle) put on the page; plotly.js's own plugin names it by its absolute path on
//   the machine that builds, which would make each build differ;
// - colors are parsed once per specifier (colorCache below).
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
// Colors parsed once per specifier: plotly.js parses a trace's color again for each SVG element it
// styles (a line trace with gaps is one path per segment: 1,657 on the sample run's Timeline), and
// culori's parser was about half of that Timeline's redraw after a zoom (measured in headless
// Chromium: 180-230 ms a redraw, 100-150 ms with the cache). Each call gets its own copy of the
// parsed color, as before.
const COLOR_MODULE = /plotly\.js[\\/]src[\\/]components[\\/]color[\\/]index\.js$/;
const UNCACHED = 'const toColor = (cstr) => {';
const CACHED_AT = '// Clamp a 0-1 channel to gamut.';
const colorCache = {
    name: 'color-cache',
    setup(build) {
        build.onLoad({ filter: COLOR_MODULE }, (args) => {
            const src = readFileSync(args.path, 'utf8');
            if (src.split(UNCACHED).length !== 2 || src.split(CACHED_AT).length !== 2) {
                throw new Error(`${args.path}: toColor not where build.mjs expects it`);
            }
            const cached = [
                'const colorCache = new Map();',
                'const toColor = (cstr) => {',
                "    if (typeof cstr !== 'string') return undefined;",
                '    let c = colorCache.get(cstr);',
                '    if (c === undefined) {',
                '        c = toColorUncached(cstr) || null;',
                '        if (colorCache.size < 4096) colorCache.set(cstr, c);',
                '    }',
                '    return c ? { ...c } : undefined;',
                '};',
                '',
            ].join('\n');
            const contents = src
                .replace(UNCACHED, 'const toColorUncached = (cstr) => {')
                .replace(CACHED_AT, cached + CACHED_AT);
            return { contents, loader: 'js' };
        });
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
    plugins: [colorCache, emptyCss, glsl({ minify: true }), environmentPlugin({ NODE_DEBUG: false })],
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
