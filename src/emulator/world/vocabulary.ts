/** Words the synthetic world is written with. Topics are what search and hashtag-search find. */

export const TOPICS = [
  'sourdough', 'booktok', 'latte art', 'skincare', 'street food', 'home workout', 'travel', 'vintage cars',
  'houseplants', 'budget meals', 'photography', 'running', 'woodworking', 'makeup', 'fashion', 'gaming',
  'guitar', 'yoga', 'baking', 'dogs', 'cats', 'gardening', 'hiking', 'coffee', 'sneakers', 'interior design',
  'meal prep', 'skateboarding', 'painting', 'chess', 'camping', 'vegan recipes', 'cocktails', 'tennis',
  'dance', 'comedy', 'science', 'history', 'language learning', 'productivity',
] as const;

export const ADJECTIVES = [
  'sunny', 'quiet', 'brave', 'lucky', 'cosmic', 'golden', 'little', 'wild', 'urban', 'daily', 'happy', 'salty',
  'sleepy', 'rapid', 'mellow', 'bright', 'silver', 'crimson', 'velvet', 'honest', 'clever', 'gentle', 'bold', 'swift',
] as const;

export const NOUNS = [
  'baker', 'reader', 'rider', 'chef', 'maker', 'painter', 'runner', 'traveler', 'gardener', 'coder', 'dancer',
  'teacher', 'fox', 'otter', 'panda', 'falcon', 'studio', 'kitchen', 'garden', 'corner', 'diaries', 'journal',
  'lab', 'club',
] as const;

export const CAPTION_OPENERS = [
  'Trying out', 'My honest take on', 'Day 12 of', 'Quick guide to', 'Nobody talks about', 'Weekend vibes with',
  'Beginner mistakes in', 'Three tips for', 'Why I love', 'Small wins with', 'Behind the scenes of', 'Rating',
] as const;

export const CAPTION_CLOSERS = [
  'you have to see this', 'part 2 soon', 'thoughts?', 'save this for later', 'worth it', 'let me know below',
  'this changed everything', 'so satisfying', 'what would you add?', 'more tomorrow',
] as const;

export const TRANSCRIPT_SENTENCES = [
  'Today we are looking at {topic} from a new angle.',
  'The first thing people get wrong about {topic} is the timing.',
  'Here is the trick that made {topic} click for me.',
  'You do not need expensive gear to start with {topic}.',
  'Watch closely, this next step is the important one.',
  'I tried this three times before it worked.',
  'If you are new to {topic}, start small and stay consistent.',
  'This is the part everyone asks me about.',
  'Let me know in the comments what you want to see next.',
  'That is it for today, follow for more {topic}.',
] as const;

export const COMMENT_TEXTS = [
  'This is so helpful, thank you!', 'Wait, how did you do that?', 'Saving this for later', 'Not me watching this at 3am',
  'The ending though', 'Need a part two', 'Tried it and it worked', 'Underrated content', 'Where is this from?',
  'I love this so much', 'Can you do a tutorial?', 'First!', 'The algorithm brought me here', 'Obsessed',
] as const;

/** The hashtag of a topic: spaces dropped, as platforms write them. */
export function hashtagOf(topic: string): string {
  return topic.replace(/\s+/g, '');
}
