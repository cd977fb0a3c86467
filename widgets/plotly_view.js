// A plotly figure whose widget state is the whole figure ({data, layout}): every view draws
// the model's current figure with Plotly.react, so a view opened later (a page reload, a
// second view of the notebook) draws what the kernel holds, and an update never refers to
// traces a view may not have.  plotly.js is the copy the Python package plotly ships; it comes
// once per page from the kernel, asked for through a shared library model whose state is empty
// (no CDN, nothing per figure, nothing in the state a reloaded page waits for).

const KEY = "__mqjoinPlotly";
const ASK_AGAIN_MS = 30000;

// The kernel's answer to {event: "plotly.js"} on the library model: the templates, and
// plotly.js as the message's buffer.  Answers go to every page of the kernel; one that arrives
// for another page's question serves this one as well.  Asked again while unanswered (a
// question sent as the kernel restarts is lost).
function askKernel(lib) {
  return new Promise((resolve) => {
    const onMessage = (content, buffers) => {
      if (!content || content.event !== "plotly.js" || !buffers || !buffers.length) return;
      clearInterval(again);
      lib.off("msg:custom", onMessage);
      resolve({ source: buffers[0], templates: content.templates || {} });
    };
    lib.on("msg:custom", onMessage);
    const ask = () => lib.send({ event: "plotly.js" });
    const again = setInterval(ask, ASK_AGAIN_MS);
    ask();
  });
}

function library(model) {
  if (!globalThis[KEY]) {
    globalThis[KEY] = (async () => {
      const ref = String(model.get("_library")).replace(/^IPY_MODEL_/, "");
      const lib = await model.widget_manager.get_model(ref);
      const { source, templates } = await askKernel(lib);
      // plotly.min.js is a UMD bundle that sets window.Plotly; loaded as a classic script from a
      // blob the browser parses it off the main thread (an eval of its 5 MB would block the page
      // for a second or more, and other widgets' set-up with it)
      const url = URL.createObjectURL(new Blob([source], { type: "text/javascript" }));
      try {
        await new Promise((resolve, reject) => {
          const script = document.createElement("script");
          script.src = url;
          script.onload = resolve;
          script.onerror = () => reject(new Error("mqjoin: plotly.js did not load"));
          document.head.appendChild(script);
        });
      } finally {
        URL.revokeObjectURL(url);
      }
      return { Plotly: globalThis.Plotly, templates };
    })();
    globalThis[KEY].catch(() => { globalThis[KEY] = null; });  // a later view tries again
  }
  return globalThis[KEY];
}

// Every draw starts in a task of its own.  The views of a notebook's figures wait for plotly.js
// together and would otherwise all draw in the one task that resumes them: seconds on a loaded
// machine during which the page runs nothing else.  Nor would anywidget's set-up of the models
// created meanwhile (a second notebook's, a tab's built on first opening), and anywidget gives a
// model 2 s from its creation to load its module before it drops the model's updates for good
// ("[anywidget] Failed to initialize model").
function nextTask() {
  return new Promise((resolve) => setTimeout(resolve, 0));
}

function figureOf(model, templates) {
  const fig = model.get("figure") || {};
  const data = structuredClone(fig.data || []);  // plotly.js writes into what it draws
  const layout = structuredClone(fig.layout || {});
  if (typeof layout.template === "string") layout.template = structuredClone(templates[layout.template] || {});
  return { data, layout };
}

async function render({ model, el }) {
  const { Plotly, templates } = await library(model);
  const div = document.createElement("div");
  div.className = "mqjoin-plotly";
  el.appendChild(div);
  const config = { displaylogo: false, responsive: false };
  let busy = false, again = false, gone = false, wired = false;

  async function draw() {  // one draw at a time; a burst of updates draws the last one
    if (busy) { again = true; return; }
    busy = true;
    try {
      do {
        again = false;
        await nextTask();
        if (gone) break;
        const { data, layout } = figureOf(model, templates);
        await Plotly.react(div, data, layout, config);
        div.dataset.revision = String(model.get("revision"));
        if (!wired) {
          wired = true;
          div.on("plotly_click", (ev) => model.send({
            event: "click", revision: model.get("revision"),
            points: (ev.points || []).map((p) => ({ trace: p.curveNumber, point: p.pointNumber })),
          }));
        }
      } while (again && !gone);
    } catch (e) {
      console.error("mqjoin: drawing a figure failed", e);
    } finally {
      busy = false;
    }
  }

  const onChange = () => { draw(); };
  model.on("change:figure", onChange);
  const resize = new ResizeObserver(() => {
    const fig = model.get("figure") || {};
    if (div._fullLayout && !(fig.layout && fig.layout.width)) Plotly.Plots.resize(div);
  });
  resize.observe(el);
  await draw();
  return () => {
    gone = true;
    model.off("change:figure", onChange);
    resize.disconnect();
    Plotly.purge(div);
  };
}

export default { render };
