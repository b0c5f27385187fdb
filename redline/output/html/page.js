"use strict";
// redline report: everything this page shows is inside this file. Plotly (inlined, gzip +
// base64) is unpacked once; each plot is drawn when it scrolls near the screen (and all of them
// before printing); a flame graph is unpacked into its frame when its section is opened.
(function () {
  function bytesOf(id) {
    const text = atob(document.getElementById(id).textContent.trim());
    const bytes = new Uint8Array(text.length);
    for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
    return bytes;
  }

  function gunzip(id) {
    const stream = new Blob([bytesOf(id)]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Response(stream).text();
  }

  const figures = JSON.parse(document.getElementById("redline-figures").textContent);
  const PRINT_WIDTH = 700;       // px: A4 or Letter with the browser's default margins
  const config = {displaylogo: false, responsive: true, showSendToCloud: false, showLink: false};

  function draw(element) {
    if (element.dataset.drawn) return;
    element.dataset.drawn = "1";
    const figure = figures[element.id];
    window.Plotly.newPlot(element, figure.data, figure.layout, config);
  }

  function drawAll() {
    document.querySelectorAll(".plot").forEach(draw);
  }

  async function start() {
    performance.mark("redline-start");
    const code = await gunzip("redline-plotly");
    performance.mark("redline-unpacked");
    const script = document.createElement("script");
    script.textContent = code;
    document.head.appendChild(script);
    performance.mark("redline-plotly");
    const plots = document.querySelectorAll(".plot");
    let firstScreen = true;
    function shown() {          // the first screen is drawn: how long opening took (performance.now)
      if (!firstScreen) return;
      firstScreen = false;
      performance.mark("redline-first-screen");
      document.body.dataset.firstScreenMs = String(Math.round(performance.now()));
    }
    if ("IntersectionObserver" in window) {
      const seen = new IntersectionObserver(function (entries) {
        entries.forEach(function (entry) {
          if (entry.isIntersecting) {
            seen.unobserve(entry.target);
            draw(entry.target);
          }
        });
        shown();
      }, {rootMargin: "600px 0px"});
      plots.forEach(function (p) { seen.observe(p); });
      if (!plots.length) shown();
    } else {
      drawAll();
      shown();
    }
    // a printed page is narrower than the screen: every plot drawn, at the paper's width
    window.addEventListener("beforeprint", function () {
      drawAll();
      document.querySelectorAll(".plot").forEach(function (p) { window.Plotly.relayout(p, {width: PRINT_WIDTH}); });
    });
    window.addEventListener("afterprint", function () {
      document.querySelectorAll(".plot").forEach(function (p) {
        window.Plotly.relayout(p, {width: null, autosize: true});
      });
    });
    document.body.dataset.plotly = "ready";
  }

  async function openFlame(details) {
    if (details.dataset.loaded) return;
    details.dataset.loaded = "1";
    const svg = await gunzip(details.dataset.payload);
    const frame = document.createElement("iframe");
    frame.title = details.querySelector("summary").textContent;
    frame.style.height = (parseInt(details.dataset.height, 10) || 800) + 24 + "px";
    details.querySelector(".flame-frame").appendChild(frame);
    // loaded only once the frame has its width: inferno sizes the graph to it when it starts
    await new Promise(function (resolve) { requestAnimationFrame(function () { requestAnimationFrame(resolve); }); });
    frame.src = URL.createObjectURL(new Blob([svg], {type: "image/svg+xml"}));
  }

  document.querySelectorAll("details.flame").forEach(function (details) {
    details.addEventListener("toggle", function () { if (details.open) openFlame(details); });
  });
  start().then(function () {     // an open flame graph is unpacked when it comes near the screen
    const open = document.querySelectorAll("details.flame[open]");
    if (!("IntersectionObserver" in window)) return open.forEach(openFlame);
    const near = new IntersectionObserver(function (entries) {
      entries.forEach(function (entry) {
        if (entry.isIntersecting) {
          near.unobserve(entry.target);
          openFlame(entry.target);
        }
      });
    }, {rootMargin: "300px 0px"});
    open.forEach(function (d) { near.observe(d); });
  });
})();
