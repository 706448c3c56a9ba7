// The addon built by `npm install` (node-gyp); see malloc_trim.c.
module.exports = require("./build/Release/malloc_trim.node")
