export * from './types';
export * from './store';
export * from './layout';
export * from './view';
export * from './tensor';
export * from './format';
export * from './profile';
export * from './monitor';
export { injectStyle, CSS } from './style';
