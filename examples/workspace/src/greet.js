// Greets someone.
export const greet = (greeting, who) => `${greeting}, ${who}!`
