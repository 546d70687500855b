/* Moved to contract/worklist.h (the worklist sits below the parts). This forwarding header keeps
 * the folders that still include it building; remove it once their includes name the contract. */
#include "../contract/worklist.h"
